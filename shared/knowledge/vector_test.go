package knowledge_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/knowledgetest"
)

// TestEmbeddedContract runs the vector index contract on the embedded
// index, in memory and in a folder, and reads a folder back as a restart
// does.
func TestEmbeddedContract(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		knowledgetest.VectorContract(t, func(t *testing.T) knowledge.VectorIndex {
			v, err := knowledge.NewEmbedded("", knowledge.Dimensions)
			if err != nil {
				t.Fatal(err)
			}
			return v
		})
	})
	t.Run("folder", func(t *testing.T) {
		t.Parallel()
		knowledgetest.VectorContract(t, func(t *testing.T) knowledge.VectorIndex {
			v, err := knowledge.NewEmbedded(t.TempDir(), knowledge.Dimensions)
			if err != nil {
				t.Fatal(err)
			}
			return v
		})
	})
	t.Run("restart", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		dir := t.TempDir()
		v1, _ := knowledge.NewEmbedded(dir, knowledge.Dimensions)
		vs, _ := knowledge.Lexical{}.Embed(ctx, []string{"alpha", "beta"})
		if err := v1.PutDocument(ctx, "kb", "d", vs); err != nil {
			t.Fatal(err)
		}
		v2, _ := knowledge.NewEmbedded(dir, knowledge.Dimensions)
		got, err := v2.Query(ctx, "kb", vs[1], 1)
		if err != nil || len(got) != 1 || got[0].Chunk != 1 {
			t.Fatalf("after restart: %+v, %v", got, err)
		}
		// A damaged file is reported, not read as vectors.
		p := filepath.Join(dir, "kb", "d.vec")
		b, _ := os.ReadFile(p)
		b[20] ^= 0xff
		_ = os.WriteFile(p, b, 0o600)
		v3, _ := knowledge.NewEmbedded(dir, knowledge.Dimensions)
		if _, err := v3.Query(ctx, "kb", vs[1], 1); err == nil {
			t.Fatal("a damaged vector file was read")
		}
	})
}
