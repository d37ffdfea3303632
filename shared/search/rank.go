package search

import (
	"html"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
)

// BM25's parameters, the usual ones.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Impact is the weight of a word in a message by which the index orders
// the word's postings, best first: BM25's term frequency part (without the
// word's idf, the same for all its postings) at the reference length
// ImpactLength instead of the user's mean length, which moves with every
// message while a posting's key must not, times ImpactScale, rounded
// down. It grows with freq and falls with length, from 0 to under
// (bm25K1+1)*ImpactScale, so that ImpactMax - Impact sorts best first.
// For postings of one count (most of a chat's: a word once in a message)
// the order is exactly BM25's whatever the mean length; between counts it
// is BM25's at the reference length.
func Impact(freq, length int) int {
	return int(ImpactScale * termWeight(float64(freq), float64(length), ImpactLength))
}

// The scale of Impact: ImpactMax bounds it, and ImpactLength (words) is
// the message length it normalises to, about a chat message's.
const (
	ImpactScale  = 10000
	ImpactMax    = 99999
	ImpactLength = 32
)

// termWeight is BM25's term frequency part for a word freq times in a
// message of length words, where the mean length is avg.
func termWeight(freq, length, avg float64) float64 {
	return freq * (bm25K1 + 1) / (freq + bm25K1*(1-bm25B+bm25B*length/avg))
}

// termList is a query word's postings read and the number of the user's
// messages it occurs in (its idf's df).
type termList struct {
	postings []Posting
	df       int64
}

// scored is a message's score for a query.
type scored struct {
	Hit
	Score float64
}

// rank scores the messages of postings (one list per query word) with
// BM25 over stats and answers the best message of each chat, best chat
// first (ties by chat id, so pages are stable).
func rank(stats Stats, postings []termList) []scored {
	n := float64(max(stats.Docs, 1))
	avg := 1.0
	if stats.Docs > 0 && stats.Length > 0 {
		avg = float64(stats.Length) / float64(stats.Docs)
	}
	byMsg := map[string]*scored{}
	for _, list := range postings {
		df := float64(max(list.df, int64(len(list.postings))))
		idf := math.Log(1 + max(n-df+0.5, 0)/(df+0.5))
		for _, p := range list.postings {
			s := idf * termWeight(float64(p.Freq), float64(p.Length), avg)
			m := byMsg[p.MessageID]
			if m == nil {
				m = &scored{Hit: Hit{ChatID: p.ChatID, MessageID: p.MessageID, Key: p.Key}}
				byMsg[p.MessageID] = m
			}
			m.Score += s
		}
	}
	best := map[string]*scored{}
	for _, m := range byMsg {
		if b := best[m.ChatID]; b == nil || m.Score > b.Score || m.Score == b.Score && m.MessageID < b.MessageID {
			best[m.ChatID] = m
		}
	}
	out := make([]scored, 0, len(best))
	for _, m := range best {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].ChatID < out[j].ChatID
	})
	return out
}

// Snippet bounds, in runes: the text shown around the first match, and
// how much of it comes before the match.
const (
	snippetRunes  = 200
	snippetBefore = 60
)

// Snippet returns the part of content around the first word of terms it
// holds, HTML-escaped, each matching word in it marked <mark>...</mark>,
// an ellipsis where content was cut. A content without a match answers
// its start.
func Snippet(content string, terms []string) string {
	want := map[string]bool{}
	for _, t := range terms {
		want[t] = true
	}
	type span struct{ start, end int }
	var matches []span
	eachWord(content, func(w string, s, e int) {
		if want[w] {
			matches = append(matches, span{s, e})
		}
	})
	from := 0
	if len(matches) > 0 {
		from = backRunes(content, matches[0].start, snippetBefore)
		// Start at a word's beginning.
		if from > 0 {
			if i := strings.IndexAny(content[from:matches[0].start], " \t\n"); i >= 0 {
				from += i + 1
			}
		}
	}
	to := forwardRunes(content, from, snippetRunes)
	if to < len(content) {
		if i := strings.LastIndexAny(content[from:to], " \t\n"); i > 0 && (len(matches) == 0 || from+i > matches[0].end) {
			to = from + i
		}
	}
	var b strings.Builder
	if from > 0 {
		b.WriteString("…")
	}
	at := from
	for _, m := range matches {
		if m.start < from || m.end > to {
			continue
		}
		b.WriteString(html.EscapeString(collapse(content[at:m.start])))
		b.WriteString("<mark>")
		b.WriteString(html.EscapeString(content[m.start:m.end]))
		b.WriteString("</mark>")
		at = m.end
	}
	b.WriteString(html.EscapeString(collapse(content[at:to])))
	if to < len(content) {
		b.WriteString("…")
	}
	return b.String()
}

// collapse turns every control character into a space: a snippet is one
// line, so neither a line break or tab nor what breaks a line in many
// viewers (U+2028, U+2029, NEL) or reverses its text (the bidirectional
// overrides and isolates) stays in it (errs.IsControl, the rule of names
// said to be one line).
func collapse(s string) string {
	return strings.Map(func(r rune) rune {
		if errs.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// backRunes returns the offset n runes before i in s (or 0).
func backRunes(s string, i, n int) int {
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return i
}

// forwardRunes returns the offset n runes after i in s (or len(s)).
func forwardRunes(s string, i, n int) int {
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}
