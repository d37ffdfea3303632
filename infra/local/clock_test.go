package local_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/local"
)

// TestFileClock: no file, the wall clock; each write of the file moves
// the clock to the wall clock plus its duration; a malformed one is no
// offset.
func TestFileClock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "clock")
	now := local.FileClock(path)
	// Bracketed by two readings of the wall clock: exact however long
	// the reading takes.
	near := func(want time.Duration) {
		t.Helper()
		before := time.Now()
		got := now()
		after := time.Now()
		if got.Before(before.Add(want)) || got.After(after.Add(want)) {
			t.Errorf("the clock is %s ahead, want %s", got.Sub(before), want)
		}
	}
	near(0)
	for _, c := range []struct {
		content string
		want    time.Duration
	}{{"90s", 90 * time.Second}, {"2h\n", 2 * time.Hour}, {"soon", 0}, {"-1m", -time.Minute}} {
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		near(c.want)
	}
}
