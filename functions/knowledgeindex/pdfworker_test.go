//go:build linux

package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/infra/gobuild"
	"github.com/workflowchat/service/shared/knowledge"
)

// TestBinaryServesPDFWorkers builds KnowledgeIndexFunction as it is
// deployed (no race detector) and uses it as the PDF sandbox's worker
// program, as knowledgecore.PDF does with the running binary: main serves
// a PDF worker when started as one, so a PDF's text comes out of it, and
// a PDF that would abort the function's process (a stack overflow) stops
// only the worker.
func TestBinaryServesPDFWorkers(t *testing.T) {
	t.Parallel()
	bin := gobuild.ForTest(t, "bootstrap", ".", gobuild.LambdaFlags...)
	s := knowledge.NewPDFSandbox(knowledge.PDFSandboxOptions{Path: bin, Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { s.Close() })
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("..", "..", "shared", "knowledge", "testdata", "pdf", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	ctx := context.Background()
	if got, err := s.PDFText(ctx, "user", read("simple.pdf")); err != nil || !strings.Contains(got, "Hello pdf world zebra quartz") {
		t.Fatalf("simple.pdf: %q, %v", got, err)
	}
	if _, err := s.PDFText(ctx, "user", read("objstm_self_container.pdf")); err == nil || !strings.Contains(err.Error(), "could not be read within its limits") {
		t.Fatalf("objstm_self_container.pdf: %v", err)
	}
	if got, err := s.PDFText(ctx, "user", read("simple.pdf")); err != nil || !strings.Contains(got, "Hello pdf world zebra quartz") {
		t.Fatalf("simple.pdf after a crash: %q, %v", got, err)
	}
}
