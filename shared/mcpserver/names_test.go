package mcpserver

import (
	"regexp"
	"strings"
	"testing"
)

// TestNameFormsMatchTheirPatterns holds the hand-written name checks to the
// regular expressions they stand for, on every short string over the
// characters that matter and on the lengths at and around each bound.
func TestNameFormsMatchTheirPatterns(t *testing.T) {
	t.Parallel()
	forms := []struct {
		name    string
		pattern *regexp.Regexp
		check   func(string) bool
	}{
		{"server name", regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`), ValidName},
		{"tool name", regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`), ValidToolName},
		{"header token", regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"), isHeaderToken},
	}
	alphabet := "aZ09_.-!#~ /:\"(@é\x00\x7f"
	var inputs []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		inputs = append(inputs, prefix)
		if n == 0 {
			return
		}
		for _, r := range alphabet {
			grow(prefix+string(r), n-1)
		}
	}
	grow("", 3)
	for _, n := range []int{31, 32, 33, 127, 128, 129, 4096} {
		for _, c := range []string{"a", "A", "_", "-"} {
			inputs = append(inputs, strings.Repeat(c, n), "a"+strings.Repeat(c, n-1))
		}
	}
	for _, f := range forms {
		for _, in := range inputs {
			if got, want := f.check(in), f.pattern.MatchString(in); got != want {
				t.Errorf("%s %q: %v, the pattern says %v", f.name, in, got, want)
			}
		}
	}
}
