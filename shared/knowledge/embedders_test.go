package knowledge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/bedrockembed"
	"github.com/workflowchat/service/shared/knowledge/openaiembed"
)

// vectorOf is what the fake endpoints answer for a text: a vector whose
// first element is its length, so the test sees each text got its own.
func vectorOf(text string, dims int) []float32 {
	v := make([]float32, dims)
	v[0] = float32(len(text))
	return v
}

// TestBedrockEmbedder: Titan Text Embeddings V2's request (one text, 512
// dimensions, normalized, to the model's invoke path) and answer, against
// a fake Bedrock; a failing Bedrock is Unavailable, a wrong length
// Internal.
func TestBedrockEmbedder(t *testing.T) {
	t.Parallel()
	dims := knowledge.Dimensions
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			InputText  string `json:"inputText"`
			Dimensions int    `json:"dimensions"`
			Normalize  bool   `json:"normalize"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &in)
		switch {
		case !strings.HasPrefix(r.URL.Path, "/model/amazon.titan-embed-text-v2:0/invoke") || in.Dimensions != 512 || !in.Normalize:
			http.Error(w, `{"message":"bad request"}`, http.StatusBadRequest)
		case in.InputText == "fail":
			http.Error(w, `{"message":"boom"}`, http.StatusInternalServerError)
		case in.InputText == "short":
			_ = json.NewEncoder(w).Encode(map[string]any{"embedding": []float32{1, 2}})
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"embedding": vectorOf(in.InputText, dims), "inputTextTokenCount": 3})
		}
	}))
	t.Cleanup(srv.Close)
	e, err := bedrockembed.New(context.Background(), bedrockembed.Options{Region: "us-east-1", Endpoint: srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Embed(context.Background(), []string{"a", "bbb", "cc"})
	if err != nil || len(vs) != 3 || vs[0][0] != 1 || vs[1][0] != 3 || vs[2][0] != 2 {
		t.Fatalf("Embed: %v, %v", err, vs)
	}
	if _, err := e.Embed(context.Background(), []string{"ok", "fail"}); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("failing Bedrock: %v, want Unavailable", err)
	}
	if _, err := e.Embed(context.Background(), []string{"short"}); !errs.Is(err, errs.Internal) {
		t.Fatalf("short vector: %v, want Internal", err)
	}
}

// TestOpenAIEmbedder: the OpenAI-compatible request (model, inputs,
// dimensions, bearer key) and its answer in any index order, against a
// fake endpoint; failures as Bedrock's.
func TestOpenAIEmbedder(t *testing.T) {
	t.Parallel()
	dims := knowledge.Dimensions
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Model      string   `json:"model"`
			Input      []string `json:"input"`
			Dimensions int      `json:"dimensions"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer k-1" || in.Model != "nomic" || in.Dimensions != 512 {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if in.Input[0] == "fail" {
			http.Error(w, "boom", http.StatusBadGateway)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i := len(in.Input) - 1; i >= 0; i-- {
			v := vectorOf(in.Input[i], dims)
			if in.Input[i] == "short" {
				v = v[:3]
			}
			data = append(data, item{Index: i, Embedding: v})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	e, err := openaiembed.New(openaiembed.Options{BaseURL: srv.URL + "/v1", Model: "nomic", Key: "k-1"})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Embed(context.Background(), []string{"a", "bbb"})
	if err != nil || len(vs) != 2 || vs[0][0] != 1 || vs[1][0] != 1 || len(vs[1]) != dims {
		t.Fatalf("Embed: %v, %v", err, vs)
	}
	if _, err := e.Embed(context.Background(), []string{"fail"}); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("failing endpoint: %v", err)
	}
	if _, err := e.Embed(context.Background(), []string{"short"}); !errs.Is(err, errs.Internal) {
		t.Fatalf("short vector: %v", err)
	}
}
