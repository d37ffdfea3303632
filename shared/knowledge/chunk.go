package knowledge

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Chunking parameters: a chunk is ChunkTokens words, and each starts
// ChunkTokens-ChunkOverlap words after the one before, so a passage cut
// by one chunk's end is whole in the next.
const (
	ChunkTokens  = 200
	ChunkOverlap = 40
)

// Chunk is one passage of a document's text: Start and End are byte
// offsets into the text Extract returned, Text is text[Start:End].
type Chunk struct {
	Index int    `json:"i"`
	Start int    `json:"s"`
	End   int    `json:"e"`
	Text  string `json:"t"`
}

// ChunkID returns the id of a document's chunk i: unique across
// knowledge bases, since document ids are.
func ChunkID(documentID string, i int) string { return documentID + ":" + strconv.Itoa(i) }

// ParseChunkID is the inverse of ChunkID; ok false for another form.
func ParseChunkID(id string) (documentID string, i int, ok bool) {
	d, n, found := strings.Cut(id, ":")
	i, err := strconv.Atoi(n)
	return d, i, found && err == nil && i >= 0
}

// span is a word's byte offsets.
type span struct{ start, end int }

// maxWordBytes bounds one word: a base64 blob or a line of digits counts
// as many words of this size, so one chunk stays bounded whatever the
// input.
const maxWordBytes = 64

// eachWord calls fn with the offsets of text's whitespace-separated
// words in order, a word longer than maxWordBytes cut (at a character
// boundary) into pieces of at most that.
func eachWord(text string, fn func(span)) {
	emit := func(w span) {
		for w.end-w.start > maxWordBytes {
			cut := w.start + maxWordBytes
			for cut > w.start && !utf8.RuneStart(text[cut]) {
				cut--
			}
			if cut == w.start {
				cut = w.start + maxWordBytes
			}
			fn(span{w.start, cut})
			w.start = cut
		}
		fn(w)
	}
	start := -1
	for i, r := range text {
		if unicode.IsSpace(r) {
			if start >= 0 {
				emit(span{start, i})
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		emit(span{start, len(text)})
	}
}

// SplitChunks cuts text into chunks of size words, each starting
// size-overlap words after the previous one (the last may be shorter,
// and is left out when the one before already reached the end); no
// chunk is empty and each spans from its first word's start to its last
// word's end. Words stream through a window of size offsets: a 25 MiB
// text's millions of words are never held at once.
func SplitChunks(text string, size, overlap int) []Chunk {
	size = max(size, 1)
	step := max(size-min(overlap, size-1), 1)
	var out []Chunk
	win := make([]span, 0, size)
	emit := func() {
		c := Chunk{Index: len(out), Start: win[0].start, End: win[len(win)-1].end}
		c.Text = text[c.Start:c.End]
		out = append(out, c)
	}
	eachWord(text, func(w span) {
		win = append(win, w)
		if len(win) == size {
			emit()
			win = win[:copy(win, win[step:])]
		}
	})
	if len(win) > 0 && (len(out) == 0 || len(win) > size-step) {
		emit()
	}
	return out
}

// stopwords are common English words left out of terms: they match every
// passage and would drown the rare words a question is about.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be by for from has have in is it its of on or that the this to was were will with
		what which who whom how when where why do does did can could should would i you he she we they them his her our your their not no`) {
		m[w] = true
	}
	return m
}()

// Terms returns the terms of text as both indexes see them: runs of
// letters and digits, lower-cased, a trailing plural "s" dropped from
// words of more than three letters, stopwords left out.
func Terms(text string) []string {
	var out []string
	var b strings.Builder
	flush := func() {
		if b.Len() == 0 {
			return
		}
		t := b.String()
		b.Reset()
		if stopwords[t] {
			return
		}
		if len(t) > 3 && strings.HasSuffix(t, "s") && !strings.HasSuffix(t, "ss") {
			t = t[:len(t)-1]
		}
		out = append(out, t)
	}
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
			if b.Len() >= maxWordBytes {
				flush()
			}
		} else {
			flush()
		}
	}
	flush()
	return out
}
