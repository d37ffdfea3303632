package knowledge_test

import (
	"context"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/knowledgetest"
)

func TestExtract(t *testing.T) {
	t.Parallel()
	zip := append([]byte("PK\x03\x04"), make([]byte, 100)...)
	tests := []struct {
		name, ct string
		data     []byte
		want     string // substring of the text
		code     string // error code, when it fails
		msg      string // substring of the error
	}{
		{"text", "text/plain", []byte("hello world"), "hello world", "", ""},
		{"markdown", "text/markdown; charset=utf-8", []byte("# Title\n\nbody"), "# Title", "", ""},
		{"csv", "text/csv", []byte("a,b\n1,2\n"), "a,b", "", ""},
		{"json", "application/json", []byte(`{"k":"v"}`), `"k"`, "", ""},
		{"invalid utf-8 replaced", "text/plain", []byte("ok \xff here"), "ok \uFFFD here", "", ""},
		{"pdf text", "application/pdf", knowledgetest.TextPDF([][]string{{"The quick brown fox."}, {"Second page (two)."}}), "Second page (two).", "", ""},
		{"scanned pdf", "application/pdf", knowledgetest.ImagePDF(2 << 20), "", knowledge.CodeExtractFailed, "no text"},
		{"zip named pdf", "application/pdf", zip, "", knowledge.CodeExtractFailed, "zip archive"},
		{"damaged pdf", "application/pdf", []byte("%PDF-1.4\n1 0 obj <<"), "", knowledge.CodeExtractFailed, "PDF"},
		{"empty text", "text/plain", []byte("  \n"), "", knowledge.CodeExtractFailed, "no text"},
		{"image", "image/png", []byte("\x89PNG"), "", knowledge.CodeUnsupportedDocument, "cannot be indexed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := knowledge.Extract(context.Background(), tt.ct, tt.data)
			if tt.code != "" {
				if errs.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("err %v, want code %s with %q", err, tt.code, tt.msg)
				}
				return
			}
			if err != nil || !strings.Contains(got, tt.want) {
				t.Fatalf("got %q, %v; want it to hold %q", got, err, tt.want)
			}
		})
	}
}

func TestSplitChunksKeepsOffsets(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("alpha beta\tgamma  délta\n", 300) + strings.Repeat("x", 1000)
	tests := []struct{ size, overlap int }{{200, 40}, {10, 3}, {1, 0}, {50, 49}}
	for _, tt := range tests {
		chunks := knowledge.SplitChunks(text, tt.size, tt.overlap)
		if len(chunks) == 0 {
			t.Fatalf("%v: no chunks", tt)
		}
		for i, c := range chunks {
			if c.Index != i || text[c.Start:c.End] != c.Text || c.Text == "" || strings.TrimSpace(c.Text) != c.Text {
				t.Fatalf("%v: chunk %d = %+v, not text[%d:%d]", tt, i, c, c.Start, c.End)
			}
			if n := len(strings.Fields(c.Text)); n > tt.size && !strings.Contains(c.Text, "xxxx") {
				t.Fatalf("%v: chunk %d has %d words", tt, i, n)
			}
			if i > 0 && c.Start <= chunks[i-1].Start {
				t.Fatalf("%v: chunk %d does not move on", tt, i)
			}
		}
		if last := chunks[len(chunks)-1]; last.End != len(text) {
			t.Fatalf("%v: last chunk ends at %d of %d", tt, last.End, len(text))
		}
		if tt.overlap > 0 && chunks[1].Start >= chunks[0].End {
			t.Fatalf("%v: chunks do not overlap", tt)
		}
	}
	if got := knowledge.SplitChunks(" \n ", 10, 2); len(got) != 0 {
		t.Fatalf("blank text: %v", got)
	}
}

func TestLexicalEmbedder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := knowledge.Lexical{}
	vs, _ := e.Embed(ctx, []string{"invoice payment terms are thirty days", "payment terms of an invoice", "the cat sat on the mat", "invoice payment terms are thirty days"})
	if len(vs[0]) != knowledge.Dimensions {
		t.Fatalf("dimensions %d", len(vs[0]))
	}
	same, near, far := knowledge.Dot(vs[0], vs[3]), knowledge.Dot(vs[0], vs[1]), knowledge.Dot(vs[0], vs[2])
	if same < 0.999 || near <= far || near < 0.3 {
		t.Fatalf("same %.3f near %.3f far %.3f", same, near, far)
	}
}

func TestSearchBM25AndFusion(t *testing.T) {
	t.Parallel()
	a := knowledge.NewSegment("a", []knowledge.Chunk{{Text: "the refund policy allows returns within 30 days"}, {Text: "shipping is free over 50 euros"}})
	b := knowledge.NewSegment("b", []knowledge.Chunk{{Text: "refund requests go to the billing team"}, {Text: "unrelated words about weather"}})
	got := knowledge.SearchBM25([]*knowledge.Segment{a, b}, "refund policy", 10)
	if len(got) != 2 || got[0].DocumentID != "a" || got[0].Chunk != 0 || got[1].DocumentID != "b" {
		t.Fatalf("bm25: %+v", got)
	}
	if got := knowledge.SearchBM25([]*knowledge.Segment{a, b}, "the of", 10); len(got) != 0 {
		t.Fatalf("stopwords only: %+v", got)
	}
	fused := knowledge.FuseRanks(2, []knowledge.Match{{DocumentID: "x", Chunk: 1}, {DocumentID: "y"}}, []knowledge.Match{{DocumentID: "y"}, {DocumentID: "z"}})
	if len(fused) != 2 || fused[0].DocumentID != "y" || fused[1].DocumentID != "x" {
		t.Fatalf("fused: %+v", fused)
	}
}

func TestParseChunkID(t *testing.T) {
	t.Parallel()
	id := knowledge.ChunkID("doc", 12)
	if d, i, ok := knowledge.ParseChunkID(id); !ok || d != "doc" || i != 12 {
		t.Fatalf("%s: %s %d %v", id, d, i, ok)
	}
	for _, bad := range []string{"doc", "doc:x", "doc:-1"} {
		if _, _, ok := knowledge.ParseChunkID(bad); ok {
			t.Fatalf("%q parsed", bad)
		}
	}
}
