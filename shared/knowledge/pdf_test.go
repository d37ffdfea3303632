package knowledge_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
)

// TestExtractHostilePDFs: files built to make the parser loop or
// decompress without end fail at once, with a message for their user and
// not the parser's own words, within little memory.
func TestExtractHostilePDFs(t *testing.T) {
	tests := []struct{ file, msg string }{
		{"cycle.pdf", "page tree loops"},                           // a /Pages node that is its own kid
		{"parentcycle.pdf", "page tree loops"},                     // a page whose /Parent chain loops
		{"bomb.pdf", "bytes of content"},                           // /Contents naming one 1 MB stream 80 times
		{"hugecount.pdf", "says it has 9000000000000000000 pages"}, // /Count 9e18
		{"selfref.pdf", "damaged"},                                 // an object that is a reference to itself
		{"refchain.pdf", "damaged"},                                // a chain of references
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/pdf/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err = knowledge.Extract(ctx, "application/pdf", data)
			took := time.Since(start)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if errs.CodeOf(err) != knowledge.CodeExtractFailed || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err %v, want %s with %q", err, knowledge.CodeExtractFailed, tt.msg)
			}
			if strings.Contains(err.Error(), "pdf.") || strings.Contains(err.Error(), "objptr") {
				t.Errorf("err %v names the parser's internals", err)
			}
			if took > 5*time.Second {
				t.Errorf("took %s", took)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("allocated %d MB", alloc>>20)
			}
		})
	}
}

func TestExtractSimplePDF(t *testing.T) {
	data, err := os.ReadFile("testdata/pdf/simple.pdf")
	if err != nil {
		t.Fatal(err)
	}
	got, err := knowledge.Extract(context.Background(), "application/pdf", data)
	if err != nil || !strings.Contains(got, "Hello pdf world zebra quartz") {
		t.Fatalf("got %q, %v", got, err)
	}
}
