package truncate_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/truncate"
)

func TestString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		max  int
		want string
		cut  bool
	}{
		{"hello", 10, "hello", false},
		{"hello", 5, "hello", false},
		{"hello", 3, "hel", true},
		{"héllo", 2, "h", true}, // é is two bytes: not split
		{"日本語", 4, "日", true},
		{"", 0, "", false},
	}
	for _, tt := range tests {
		got, cut := truncate.String(tt.in, tt.max)
		if got != tt.want || cut != tt.cut {
			t.Errorf("String(%q, %d) = %q, %v; want %q, %v", tt.in, tt.max, got, cut, tt.want, tt.cut)
		}
	}
}

// TestEllipsis: a cut never splits a multi-byte character, whichever of
// its bytes the bound falls on.
func TestEllipsis(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello", 4, "hell…"},
		{"aé", 2, "a…"},   // the bound falls inside é
		{"a€b", 2, "a…"},  // inside the three bytes of €
		{"a€b", 3, "a…"},  // on its last byte
		{"a€b", 4, "a€…"}, // right after it
		{"😀😀", 5, "😀…"},   // inside the second four-byte emoji
		{"日本語", 8, "日本…"},
		{"", 0, ""},
	}
	for _, tt := range tests {
		got := truncate.Ellipsis(tt.in, tt.max)
		if got != tt.want || !utf8.ValidString(got) {
			t.Errorf("Ellipsis(%q, %d) = %q; want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

// decodeCut checks v is a cut value and returns its preview.
func decodeCut(t *testing.T, v json.RawMessage) string {
	t.Helper()
	var c struct {
		Truncated bool
		Preview   string
	}
	if err := json.Unmarshal(v, &c); err != nil || !c.Truncated || !utf8.ValidString(c.Preview) {
		t.Fatalf("not a cut value: %.100s (%v)", v, err)
	}
	return c.Preview
}

func TestFit(t *testing.T) {
	t.Parallel()
	big := func(n int, ch string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"s": strings.Repeat(ch, n)})
		return b
	}
	tests := []struct {
		name    string
		sizes   []int
		ch      string
		budget  int
		wantCut []bool
	}{
		{"small values stay whole", []int{10, 20}, "x", truncate.MaxItem, []bool{false, false}},
		{"a value over MaxValue is cut", []int{300 << 10, 10}, "x", 1 << 30, []bool{true, false}},
		{"the largest is cut to fit the budget", []int{200 << 10, 150 << 10, 1 << 10}, "x", truncate.MaxItem, []bool{true, false, false}},
		{"escaping counts", []int{200 << 10, 200 << 10}, `"`, truncate.MaxItem, []bool{true, true}},
		{"fifty values over the budget", func() []int {
			s := make([]int, 50)
			for i := range s {
				s[i] = 100 << 10
			}
			return s
		}(), "é", truncate.MaxItem, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var vals []json.RawMessage
			for _, n := range tt.sizes {
				vals = append(vals, big(n, tt.ch))
			}
			orig := append([]json.RawMessage(nil), vals...)
			cut := truncate.Fit(vals, tt.budget)
			total := 0
			for i, v := range vals {
				total += len(v)
				if len(v) > truncate.MaxValue {
					t.Errorf("value %d is %d bytes, over MaxValue", i, len(v))
				}
				if cut[i] {
					if p := decodeCut(t, v); !strings.HasPrefix(string(orig[i]), p) || len(p) < truncate.MinPreview/6 {
						t.Errorf("value %d: preview of %d bytes is not the start of the value", i, len(p))
					}
				} else if string(v) != string(orig[i]) {
					t.Errorf("value %d changed without being cut", i)
				}
			}
			if total > tt.budget {
				t.Errorf("total %d bytes, over the budget %d", total, tt.budget)
			}
			if tt.wantCut != nil {
				for i := range cut {
					if cut[i] != tt.wantCut[i] {
						t.Errorf("cut = %v, want %v", cut, tt.wantCut)
						break
					}
				}
			}
			if truncate.Any(cut) != (tt.wantCut == nil || truncate.Any(tt.wantCut)) {
				t.Errorf("Any(%v) wrong", cut)
			}
		})
	}
}

// TestCutTwice: cutting a cut value shortens its preview instead of
// nesting it, so a record bounded at every save stays flat.
func TestCutTwice(t *testing.T) {
	t.Parallel()
	v, _ := json.Marshal(map[string]string{"s": strings.Repeat("y", 5000)})
	once := truncate.Cut(v, 3000)
	twice := truncate.Cut(once, 2000)
	if len(twice) > 2000 {
		t.Fatalf("twice: %d bytes", len(twice))
	}
	if p := decodeCut(t, twice); !strings.HasPrefix(string(v), p) || len(p) < 1500 {
		t.Errorf("twice: preview %.60q is not the start of the value", p)
	}
	// As a record holds it: decoded into a map and encoded again.
	var m map[string]any
	_ = json.Unmarshal(once, &m)
	reencoded, _ := json.Marshal(m)
	if p := decodeCut(t, truncate.Cut(reencoded, 2000)); !strings.HasPrefix(string(v), p) {
		t.Errorf("re-encoded cut value cut again: preview %.60q", p)
	}
	vals := []json.RawMessage{once, v}
	truncate.Fit(vals, 1500)
	for i, v := range vals {
		if p := decodeCut(t, v); strings.Contains(p, "preview") {
			t.Errorf("value %d nested: %.80s", i, v)
		}
	}
}
