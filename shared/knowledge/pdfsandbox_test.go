package knowledge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/gobuild"
	"github.com/workflowchat/service/shared/errs"
)

// pdfWorkerBin is internal/pdfworker, built without the race detector
// (see that command's comment).
var pdfWorkerBin string

func TestMain(m *testing.M) {
	if runtime.GOOS != "linux" {
		os.Exit(m.Run())
	}
	bin, remove, err := gobuild.ForMain("pdfworker", "./internal/pdfworker")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pdfWorkerBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// testPDFSandbox returns a PDFSandbox of real workers whose reading of one
// PDF is bounded by timeout.
func testPDFSandbox(t *testing.T, timeout time.Duration) *PDFSandbox {
	t.Helper()
	if pdfWorkerBin == "" {
		t.Skip("worker limits are enforced on Linux only")
	}
	s := NewPDFSandbox(PDFSandboxOptions{Path: pdfWorkerBin, Timeout: timeout, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPDFSandboxHostile: files that, read in process, abort the Go runtime
// (a stack overflow, an allocation of gigabytes: fatal errors no recover
// catches) or loop where no deadline is checked, fail their document with
// EXTRACT_FAILED within the worker's bounds; this process survives them,
// and the pool reads an ordinary PDF after them.
func TestPDFSandboxHostile(t *testing.T) {
	// Well over the milliseconds the in-process guards take; the files
	// that meet it loop forever, whatever the machine's speed.
	const timeout = 1500 * time.Millisecond
	s := testPDFSandbox(t, timeout)
	tests := []struct{ file, msg string }{
		{"objstm_self_container.pdf", msgPDFLimits},                      // an object stream that contains itself: endless recursion
		{"xrefstm_size_1g.pdf", msgPDFLimits},                            // an xref stream of /Size 1e9: gigabytes allocated
		{"pred_columns.pdf", msgPDFLimits},                               // a predictor's /Columns sized to gigabytes
		{"prevloop.pdf", msgPDFLimits + ": reading it takes more than"},  // an xref /Prev chain that loops, inside NewReader
		{"xrefstm_prevloop.pdf", msgPDFLimits},                           // the same through xref streams
		{"objstm_extends_self.pdf", msgPDFLimits + ": reading it takes"}, // an object stream that /Extends itself
		{"cycle.pdf", "page tree loops"},                                 // the in-process guards still answer cheap ones
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/pdf/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = extract(context.Background(), s, "user", "application/pdf", data)
			took := time.Since(start)
			if errs.CodeOf(err) != CodeExtractFailed || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err %v, want %s with %q", err, CodeExtractFailed, tt.msg)
			}
			if errs.KindOf(err) != errs.Invalid {
				t.Errorf("err %v is not Invalid", err)
			}
			// A worker's start, then its run to the timeout, then the
			// kill: a hang would pass any bound (this is no speed test).
			if took > timeout+time.Minute {
				t.Errorf("took %s, for a timeout of %s", took, timeout)
			}
			t.Logf("%s: %s in %s", tt.file, err, took.Round(time.Millisecond))
		})
	}
	data, err := os.ReadFile("testdata/pdf/simple.pdf")
	if err != nil {
		t.Fatal(err)
	}
	got, err := extract(context.Background(), s, "user", "application/pdf", data)
	if err != nil || !strings.Contains(got, "Hello pdf world zebra quartz") {
		t.Fatalf("simple.pdf after the hostile ones: %q, %v", got, err)
	}
}

// TestPDFSandboxSimple: an ordinary PDF's text comes out of a worker as
// it does in process.
func TestPDFSandboxSimple(t *testing.T) {
	s := testPDFSandbox(t, 0)
	data, err := os.ReadFile("testdata/pdf/simple.pdf")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Extract(context.Background(), "application/pdf", data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := extract(context.Background(), s, "user", "application/pdf", data)
	if err != nil || got != want {
		t.Fatalf("through the worker: %q, %v; in process %q", got, err, want)
	}
	// Not a PDF at all: the worker's own message, as in process.
	_, err = extract(context.Background(), s, "user", "application/pdf", []byte("PK\x03\x04zip"))
	if errs.CodeOf(err) != CodeExtractFailed || !strings.Contains(err.Error(), "zip archive") {
		t.Errorf("a zip: %v", err)
	}
}

// TestPDFSandboxAttemptEnds: when the indexing attempt's context ends
// (its lease lost, its timeout), the reading stops with the context's
// error, not a failure of the file's.
func TestPDFSandboxAttemptEnds(t *testing.T) {
	s := testPDFSandbox(t, time.Minute)
	data, err := os.ReadFile("testdata/pdf/prevloop.pdf")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = extract(ctx, s, "user", "application/pdf", data)
	if !errors.Is(err, context.DeadlineExceeded) || errs.CodeOf(err) == CodeExtractFailed {
		t.Fatalf("err %v, want the context's", err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("took %s", took)
	}
}
