package knowledgetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/workflowchat/service/shared/knowledge"
)

// VectorContract checks what every knowledge.VectorIndex must do, on
// indexes newIndex returns (each test gets its own).
func VectorContract(t *testing.T, newIndex func(t *testing.T) knowledge.VectorIndex) {
	ctx := context.Background()
	emb := knowledge.Lexical{}
	texts := []string{"refund policy and returns", "shipping costs by country", "the billing team handles invoices"}
	vs, _ := emb.Embed(ctx, texts)
	q, _ := emb.Embed(ctx, []string{"billing invoices"})

	t.Run("query finds nearest first", func(t *testing.T) {
		x := newIndex(t)
		if err := x.PutDocument(ctx, "kb1", "doc1", vs); err != nil {
			t.Fatalf("PutDocument: %v", err)
		}
		got, err := x.Query(ctx, "kb1", q[0], 2)
		if err != nil || len(got) != 2 || got[0].DocumentID != "doc1" || got[0].Chunk != 2 || got[0].Score < got[1].Score {
			t.Fatalf("Query: %+v, %v; want doc1 chunk 2 first of 2", got, err)
		}
	})
	t.Run("knowledge bases are apart", func(t *testing.T) {
		x := newIndex(t)
		if err := x.PutDocument(ctx, "kb1", "doc1", vs); err != nil {
			t.Fatal(err)
		}
		if got, err := x.Query(ctx, "kb2", q[0], 5); err != nil || len(got) != 0 {
			t.Fatalf("other knowledge base: %+v, %v", got, err)
		}
	})
	t.Run("delete and replace", func(t *testing.T) {
		x := newIndex(t)
		if err := x.PutDocument(ctx, "kb1", "doc1", vs); err != nil {
			t.Fatal(err)
		}
		if err := x.PutDocument(ctx, "kb1", "doc2", vs[:1]); err != nil {
			t.Fatal(err)
		}
		if err := x.DeleteDocument(ctx, "kb1", "doc1", len(vs)); err != nil {
			t.Fatal(err)
		}
		got, err := x.Query(ctx, "kb1", q[0], 10)
		if err != nil || len(got) != 1 || got[0].DocumentID != "doc2" {
			t.Fatalf("after delete: %+v, %v", got, err)
		}
		if err := x.DeleteDocument(ctx, "kb1", "missing", 3); err != nil {
			t.Fatalf("delete of nothing: %v", err)
		}
	})
	t.Run("many vectors", func(t *testing.T) {
		x := newIndex(t)
		many := make([]string, 1200)
		for i := range many {
			many[i] = fmt.Sprintf("item number %d of the catalogue", i)
		}
		mv, _ := emb.Embed(ctx, many)
		if err := x.PutDocument(ctx, "kb1", "big", mv); err != nil {
			t.Fatal(err)
		}
		got, err := x.Query(ctx, "kb1", mv[777], 3)
		if err != nil || len(got) != 3 || got[0].Chunk != 777 {
			t.Fatalf("query of 1,200: %+v, %v", got, err)
		}
	})
	t.Run("wrong dimensions", func(t *testing.T) {
		x := newIndex(t)
		if err := x.PutDocument(ctx, "kb1", "doc1", [][]float32{{1, 2}}); err == nil {
			t.Fatal("a 2-dimension vector was taken")
		}
	})
}
