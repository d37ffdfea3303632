package search_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/workflowchat/service/shared/search"
)

func TestFold(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"crème", "creme"}, {"CRÈME", "creme"}, {"Crème", "creme"}, {"creme", "creme"},
		{"Straße", "strasse"}, {"Ærø", "aero"}, {"Łódź", "lodz"}, {"ﬁne", "fine"}, {"Ｗｉｄｅ", "wide"},
		{"ÇA", "ca"}, {"naïve", "naive"}, {"2026", "2026"}, {"日本語", "日本語"},
	}
	for _, tt := range tests {
		if got := search.Fold(tt.in); got != tt.want {
			t.Errorf("Fold(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAnalyze(t *testing.T) {
	t.Parallel()
	a := search.Analyze("The Crème brûlée, the CREME; and crème-brûlée! x " + strings.Repeat("y", search.MaxTermBytes+1))
	want := search.Analysis{Terms: []search.Term{{"creme", 3}, {"brulee", 2}, {"x", 1}}, Length: 6}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("Analyze (-want +got):\n%s", diff)
	}

	// A message of 10,000 distinct words keeps its MaxTermsPerMessage most
	// frequent ones, and counts every word in its length.
	var b strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&b, "w%d ", i)
	}
	b.WriteString("w9999 w9999 w5000")
	a = search.Analyze(b.String())
	if len(a.Terms) != search.MaxTermsPerMessage || a.Length != 10003 {
		t.Fatalf("10,000 words: %d terms, length %d; want %d, 10003", len(a.Terms), a.Length, search.MaxTermsPerMessage)
	}
	if a.Terms[0] != (search.Term{Text: "w9999", Freq: 3}) || a.Terms[1] != (search.Term{Text: "w5000", Freq: 2}) || a.Terms[2].Text != "w0" {
		t.Errorf("most frequent first, then in order: %v", a.Terms[:3])
	}
}

func TestQueryTerms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		q    string
		want []string
	}{
		{"Crème BRÛLÉE crème", []string{"creme", "brulee"}},
		{"the and", nil},
		{"!!", nil},
		{"a b c d e f g h i j k l", []string{"b", "c", "d", "e", "f", "g", "h", "i"}},
	}
	for _, tt := range tests {
		if got := search.QueryTerms(tt.q); !cmp.Equal(got, tt.want) {
			t.Errorf("QueryTerms(%q) = %q, want %q", tt.q, got, tt.want)
		}
	}
}

func TestSnippet(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("lorem ipsum ", 40)
	tests := []struct {
		name, content string
		terms         []string
		want          string
	}{
		{"marks every match, escapes the rest", "Une <b>CRÈME</b> & une crème", []string{"creme"},
			"Une &lt;b&gt;<mark>CRÈME</mark>&lt;/b&gt; &amp; une <mark>crème</mark>"},
		{"one line", "first\nsecond\tthird", []string{"second"}, "first <mark>second</mark> third"},
		{"one line whatever breaks or turns it", "a\u2028b\u2029c\u0085d\x00e\x1bf\u202eneedle\u2066g\r\nh\u200di", []string{"needle"},
			"a b c d e f <mark>needle</mark> g  h\u200di"},
		{"cut around a late match", long + "needle " + long, []string{"needle"},
			"…ipsum lorem ipsum lorem ipsum lorem ipsum lorem ipsum <mark>needle</mark> lorem ipsum lorem ipsum lorem ipsum lorem ipsum lorem ipsum lorem ipsum lorem ipsum lorem ipsum lorem ipsum lorem ipsum lorem ipsum lorem…"},
		{"no match: the start", "abc def", []string{"zzz"}, "abc def"},
	}
	for _, tt := range tests {
		if got := search.Snippet(tt.content, tt.terms); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}
