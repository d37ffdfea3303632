package store_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDataInventoryNamesEveryKeyPrefix: docs/data.md, the list of every
// place a user's data lives and what erases it, names every key prefix
// the store writes (a string literal such as "CHAT#" in its code) and
// every blob prefix: a new kind of item cannot be added without saying
// how an account's erasure removes it.
func TestDataInventoryNamesEveryKeyPrefix(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/data.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	literal := regexp.MustCompile(`"([A-Z][A-Z_]+#)`)
	prefixes := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literal.FindAllStringSubmatch(string(b), -1) {
			prefixes[m[1]] = f
		}
	}
	blobs, err := os.ReadFile("../blob/blob.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`Prefix[A-Z][a-z]+ += "([a-z]+/)"`).FindAllStringSubmatch(string(blobs), -1) {
		prefixes[m[1]] = "shared/blob/blob.go"
	}
	if len(prefixes) < 20 {
		t.Fatalf("found only %d prefixes: the scan is broken", len(prefixes))
	}
	var missing []string
	for p, f := range prefixes {
		if !strings.Contains(string(doc), "`"+p) {
			missing = append(missing, p+" ("+f+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/data.md does not name %v: say where that data lives and what erases it", missing)
	}
}
