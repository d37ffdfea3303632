// Package search is the full-text search over a user's chat messages: the
// analysis of text into words (folded for case and accents), the BM25
// ranking of the messages that match a query, the snippets that show the
// match, and the service that keeps a user's index current (Indexer) and
// answers GET /api/users/{userId}/chats/search. The index itself is
// storage (Index), implemented over DynamoDB by the store package.
package search

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Bounds of the analysis. A word longer than MaxTermBytes (folded) is not
// indexed (a run of 64 letters is a hash or noise, not a word anyone types);
// a message keeps at most MaxTermsPerMessage distinct words in the index,
// its most frequent ones, so a message of any size writes a bounded number
// of postings.
const (
	MaxTermBytes       = 64
	MaxTermsPerMessage = 500
)

// Term is one distinct word of a text with how often it occurs.
type Term struct {
	Text string
	Freq int
}

// Analysis is what the index keeps of a message: its distinct words, at
// most MaxTermsPerMessage, most frequent first, and its length in words
// (all of them, for BM25's length normalisation).
type Analysis struct {
	Terms  []Term
	Length int
}

// Analyze splits text into words, folds them (Fold) and drops stop words.
func Analyze(text string) Analysis {
	freq := map[string]int{}
	var order []string
	n := 0
	eachWord(text, func(w string, _, _ int) {
		n++
		if freq[w] == 0 {
			order = append(order, w)
		}
		freq[w]++
	})
	terms := make([]Term, len(order))
	for i, w := range order {
		terms[i] = Term{Text: w, Freq: freq[w]}
	}
	// Most frequent first; ties in order of first appearance.
	sort.SliceStable(terms, func(i, j int) bool { return terms[i].Freq > terms[j].Freq })
	if len(terms) > MaxTermsPerMessage {
		terms = terms[:MaxTermsPerMessage]
	}
	return Analysis{Terms: terms, Length: n}
}

// QueryTerms returns the distinct folded words of a query in their order,
// at most MaxQueryTerms.
func QueryTerms(q string) []string {
	seen := map[string]bool{}
	var out []string
	eachWord(q, func(w string, _, _ int) {
		if !seen[w] && len(out) < MaxQueryTerms {
			seen[w] = true
			out = append(out, w)
		}
	})
	return out
}

// MaxQueryTerms bounds the words of a query that are looked up (each is
// one read of the index).
const MaxQueryTerms = 8

// eachWord calls f with each indexable word of text, folded, and its byte
// offsets in text. A word is a run of letters, digits and combining marks;
// a folded word that is empty, longer than MaxTermBytes or a stop word is
// skipped.
func eachWord(text string, f func(w string, start, end int)) {
	start := -1
	word := func(end int) {
		if w := Fold(text[start:end]); w != "" && len(w) <= MaxTermBytes && !stopWords[w] {
			f(w, start, end)
		}
		start = -1
	}
	for i, r := range text {
		switch {
		case isWordRune(r):
			if start < 0 {
				start = i
			}
		case start >= 0:
			word(i)
		}
	}
	if start >= 0 {
		word(len(text))
	}
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// Fold returns word lower-cased with its accents removed (compatibility
// decomposition, combining marks dropped) and the letters that do not
// decompose spelled out (ß as ss, æ as ae, ø as o, ...): "Crème", "CREME"
// and "crème" are one word.
func Fold(word string) string {
	if isASCIILower(word) {
		return word
	}
	var b strings.Builder
	for _, r := range norm.NFKD.String(word) {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		r = unicode.ToLower(r)
		if s, ok := spelled[r]; ok {
			b.WriteString(s)
			continue
		}
		if r == utf8.RuneError || !isWordRune(r) {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isASCIILower(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// spelled are the letters compatibility decomposition keeps whole.
var spelled = map[rune]string{
	'ß': "ss", 'æ': "ae", 'œ': "oe", 'ø': "o", 'ł': "l", 'đ': "d", 'ð': "d", 'þ': "th", 'ı': "i", 'ħ': "h", 'ŧ': "t",
}

// stopWords are English words too common to rank by: they are not
// indexed (a third of the postings of English text) and a query of only
// them matches nothing.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be but by for if in into is it no not of on or such
		that the their then there these they this to was will with`) {
		m[w] = true
	}
	return m
}()
