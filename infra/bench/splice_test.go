package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// handDoc is a report as people keep it: a header of its own, a section
// measured by hand between two generated ones, a paragraph after a
// generated section's end marker, and a hand section at the end without a
// final blank line or newline.
const handDoc = "# Benchmarks\n\nHeader kept by hand.\n\n" +
	"<!-- bench:begin A -->\n## A\n\n*Measured 1.*\n\n| a | 1 |\n<!-- bench:end A -->\n\n" +
	"## By hand: knowledge bases\n\n*Measured by hand.*\n\n| k | 9 |\n\n" +
	"<!-- bench:begin B: with, punctuation's -->\n## B: with, punctuation's\n\n*Measured 2.*\n\nBy hand on 2026-12-01 (`x`): a note.\n<!-- bench:end B: with, punctuation's -->\n\n" +
	"By hand on 2026-12-02 (`y`): a paragraph after B, kept.\n" +
	"<!-- bench:begin C -->\n## C\n\nold C\n<!-- bench:end C -->\n" +
	"## Export, by hand\n\nno final newline"

func TestSpliceKeepsEverythingElse(t *testing.T) {
	t.Parallel()
	known := []string{"A", "B: with, punctuation's", "C"}
	tests := []struct {
		name  string
		fresh map[string]string
		// want: handDoc with these replacements, and nothing else.
		old, new []string
	}{
		{"nothing measured", nil, nil, nil},
		{"the middle section", map[string]string{"B: with, punctuation's": "## B: with, punctuation's\n\n*Measured 3.*\n\nnew B\n"},
			[]string{"*Measured 2.*\n\nBy hand on 2026-12-01 (`x`): a note.\n"}, []string{"*Measured 3.*\n\nnew B\n"}},
		{"the last one, its text with stray blank lines", map[string]string{"C": "\n## C\n\nnew C\n\n\n"},
			[]string{"old C\n"}, []string{"new C\n"}},
		{"all of them", map[string]string{"A": "## A\n\nnew A\n", "B: with, punctuation's": "## B: with, punctuation's\n\nnew B\n", "C": "## C\n\nnew C\n"},
			[]string{"*Measured 1.*\n\n| a | 1 |\n", "*Measured 2.*\n\nBy hand on 2026-12-01 (`x`): a note.\n", "old C\n"},
			[]string{"new A\n", "new B\n", "new C\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := handDoc
			for i := range tt.old {
				if strings.Count(want, tt.old[i]) != 1 {
					t.Fatalf("the test's %q is not once in the document", tt.old[i])
				}
				want = strings.Replace(want, tt.old[i], tt.new[i], 1)
			}
			got, err := splice(handDoc, known, tt.fresh)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
			// Splicing the same again changes nothing: nothing accumulates.
			if again, err := splice(got, known, tt.fresh); err != nil || again != got {
				t.Errorf("a second splice changed the document (%v):\n%s", err, again)
			}
		})
	}
}

func TestSpliceEmptyMarkersSayHowToMeasure(t *testing.T) {
	t.Parallel()
	doc := "# B\n\n<!-- bench:begin A -->\n<!-- bench:end A -->\n\n<!-- bench:begin C.* -->\n<!-- bench:end C.* -->\nhand\n"
	got, err := splice(doc, []string{"A", "C.*"}, map[string]string{"A": "## A\n\nnew\n"})
	if err != nil {
		t.Fatal(err)
	}
	want := "# B\n\n<!-- bench:begin A -->\n## A\n\nnew\n<!-- bench:end A -->\n\n" +
		"<!-- bench:begin C.* -->\n## C.*\n\nNot measured yet: `go run ./infra/bench -only 'C\\.\\*'`.\n<!-- bench:end C.* -->\nhand\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestSpliceRefusesMarkersItCannotPlace(t *testing.T) {
	t.Parallel()
	known := []string{"A", "B"}
	a := "<!-- bench:begin A -->\n## A\n<!-- bench:end A -->\n"
	b := "<!-- bench:begin B -->\n## B\n<!-- bench:end B -->\n"
	tests := []struct {
		name, doc string
		fresh     map[string]string
		want      []string // in the error
	}{
		{"unknown section", a + b + "<!-- bench:begin Renamed -->\n## Renamed\n<!-- bench:end Renamed -->\n", nil,
			[]string{`"Renamed"`, "line 7", "does not have"}},
		{"a section without markers", a + "## B\n\nby hand\n", map[string]string{"A": "## A\n"},
			[]string{`section "B" has no markers`, "<!-- bench:begin B -->", "<!-- bench:end B -->"}},
		{"no markers at all (an old report)", "# Benchmarks\n\n## A\n\nx\n\n## B\n\ny\n", map[string]string{"A": "## A\n"},
			[]string{`"A" has no markers`}},
		{"begin without end", a + "<!-- bench:begin B -->\n## B\n\nthe rest of the file\n", map[string]string{"B": "## B\n"},
			[]string{`section "B" (line 4) has no end marker`}},
		{"a begin inside an open section", "<!-- bench:begin A -->\n## A\n" + b, nil,
			[]string{`line 3: section "B" begins inside section "A" (line 1)`}},
		{"end without begin", a + "## B\n<!-- bench:end B -->\n", nil,
			[]string{`line 5: end marker of section "B" without its begin marker`}},
		{"end of another section", "<!-- bench:begin A -->\n## A\n<!-- bench:end B -->\n" + b, nil,
			[]string{`line 3: end marker of section "B" inside section "A"`}},
		{"marked twice", a + b + a, nil,
			[]string{`line 7: section "A" is marked twice (first at line 1)`}},
		{"a malformed marker", a + b + "<!-- bench:end -->\n", nil,
			[]string{"line 7", "is not a marker"}},
		{"a marker without its closing", a + "<!-- bench:begin B\n## B\n<!-- bench:end B -->\n", nil,
			[]string{"line 4", "is not a marker"}},
		{"a measured section that is not the tool's", a + b, map[string]string{"Z": "## Z\n"},
			[]string{`"Z" is not one of`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := splice(tt.doc, known, tt.fresh)
			if err == nil {
				t.Fatalf("no error; got\n%s", got)
			}
			if got != "" {
				t.Errorf("a document with the error: %q", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestUpdateReportLeavesABadFileAlone: a report the tool cannot splice is
// not written, not even in part; a good one is rewritten in place, and a
// missing one is made whole.
func TestUpdateReportLeavesABadFileAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.md")
	badDoc := handDoc + "\n<!-- bench:begin Gone -->\n## Gone\n<!-- bench:end Gone -->\n"
	if err := os.WriteFile(bad, []byte(badDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	known := []string{"A", "B: with, punctuation's", "C"}
	err := updateReport(bad, known, map[string]string{"A": "## A\n\nnew A\n"})
	if err == nil || !strings.Contains(err.Error(), `"Gone"`) || !strings.Contains(err.Error(), bad) {
		t.Errorf("got %v, want an error naming the file and the section Gone", err)
	}
	if b, _ := os.ReadFile(bad); string(b) != badDoc {
		t.Errorf("the file changed:\n%s", b)
	}

	good := filepath.Join(dir, "good.md")
	if err := os.WriteFile(good, []byte(handDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := updateReport(good, known, nil); err != nil {
		t.Fatal(err)
	}
	if err := updateReport(good, known, map[string]string{"C": "## C\n\nnew C\n"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(good); string(b) != strings.Replace(handDoc, "old C\n", "new C\n", 1) {
		t.Errorf("got\n%s", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary files left: %v", entries)
	}

	fresh := filepath.Join(dir, "new.md")
	if err := updateReport(fresh, known, map[string]string{"B: with, punctuation's": "## B: with, punctuation's\n\nnew B\n"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(fresh)
	want := preamble + "\n<!-- bench:begin A -->\n## A\n\nNot measured yet: `go run ./infra/bench -only 'A'`.\n<!-- bench:end A -->\n" +
		"\n<!-- bench:begin B: with, punctuation's -->\n## B: with, punctuation's\n\nnew B\n<!-- bench:end B: with, punctuation's -->\n" +
		"\n<!-- bench:begin C -->\n## C\n\nNot measured yet: `go run ./infra/bench -only 'C'`.\n<!-- bench:end C -->\n"
	if string(b) != want {
		t.Errorf("new report:\n%s", b)
	}
}

// TestReportMarkers: docs/benchmarks.md has the markers of every section
// and no others, and holds nothing between them that a run would drop: a
// region is its section's heading, what the tool writes and the section's
// hand notes; a paragraph added by hand goes after the end marker.
func TestReportMarkers(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if got, err := splice(doc, titles(), nil); err != nil || got != doc {
		t.Fatalf("docs/benchmarks.md does not splice unchanged: %v", err)
	}
	regions, err := parseRegions(doc)
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string][]handNote{}
	for _, s := range sections {
		notes[s.title] = s.notes
	}
	for _, r := range regions {
		content := doc[r.start:r.end]
		if !strings.HasPrefix(content, "## "+r.title+"\n") {
			t.Errorf("line %d: section %q does not start with its heading", r.line, r.title)
		}
		var written []string
		for _, n := range notes[r.title] {
			written = append(written, "By hand on "+n.date+" (`"+n.command+"`): "+n.text)
		}
		var inDoc []string
		for _, p := range strings.Split(content, "\n\n") {
			if p = strings.TrimSpace(p); strings.HasPrefix(p, "By hand") {
				inDoc = append(inDoc, p)
			}
		}
		if strings.Join(inDoc, "\n") != strings.Join(written, "\n") {
			t.Errorf("line %d: section %q holds hand paragraphs that are not its notes (a run would drop them: put them after its end marker):\n%s", r.line, r.title, strings.Join(inDoc, "\n"))
		}
	}
}
