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

// words returns the offsets of text's whitespace-separated words.
func words(text string) []span {
	var out []span
	start := -1
	for i, r := range text {
		if unicode.IsSpace(r) {
			if start >= 0 {
				out = append(out, span{start, i})
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, span{start, len(text)})
	}
	return out
}

// SplitChunks cuts text into chunks of size words, each starting
// size-overlap words after the previous one (the last may be shorter);
// no chunk is empty and each spans from its first word's start to its
// last word's end. A word longer than maxWordBytes is cut so that one
// chunk stays bounded whatever the input.
func SplitChunks(text string, size, overlap int) []Chunk {
	if size < 1 {
		size = 1
	}
	step := max(size-overlap, 1)
	ws := splitLong(words(text), text)
	var out []Chunk
	for first := 0; first < len(ws); first += step {
		last := min(first+size, len(ws)) - 1
		c := Chunk{Index: len(out), Start: ws[first].start, End: ws[last].end}
		c.Text = text[c.Start:c.End]
		out = append(out, c)
		if last == len(ws)-1 {
			break
		}
	}
	return out
}

// maxWordBytes bounds one word: a base64 blob or a line of digits counts
// as many words of this size.
const maxWordBytes = 64

func splitLong(ws []span, text string) []span {
	out := ws[:0:0]
	for _, w := range ws {
		for w.end-w.start > maxWordBytes {
			cut := w.start + maxWordBytes
			for cut > w.start && !utf8.RuneStart(text[cut]) {
				cut--
			}
			if cut == w.start {
				cut = w.start + maxWordBytes
			}
			out = append(out, span{w.start, cut})
			w.start = cut
		}
		out = append(out, w)
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
