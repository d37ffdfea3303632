// Package openaiembed is the knowledge.Embedder of an OpenAI-compatible
// embeddings endpoint (POST <base>/embeddings), e.g. OpenAI's or a local
// Ollama's.
package openaiembed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
)

// Options configure an Embedder.
type Options struct {
	// BaseURL is the endpoint's base, e.g. https://api.openai.com/v1.
	BaseURL string
	Model   string
	// Key is the API key (sent as a bearer token; never logged).
	Key string
	// HTTP is the client; nil means one with a 60 s timeout.
	HTTP *http.Client
}

// Embedder embeds through the endpoint.
type Embedder struct{ o Options }

// New returns an Embedder; it fails without a base URL or model.
func New(o Options) (*Embedder, error) {
	if o.BaseURL == "" || o.Model == "" {
		return nil, fmt.Errorf("openaiembed: KNOWLEDGE_EMBEDDING_URL and KNOWLEDGE_EMBEDDING_MODEL are required")
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 60 * time.Second}
	}
	return &Embedder{o: o}, nil
}

// Name is "openai/<model>".
func (e *Embedder) Name() string { return "openai/" + e.o.Model }

// Dimensions is knowledge.Dimensions (requested with each call).
func (e *Embedder) Dimensions() int { return knowledge.Dimensions }

type request struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions"`
}

type response struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// maxResponse bounds the endpoint's answer (64 vectors of 512 floats as
// JSON are under 1 MiB).
const maxResponse = 16 << 20

// Embed sends texts in one call. Unavailable when the endpoint cannot be
// reached or fails; Internal when it answers vectors that do not match
// the texts or knowledge.Dimensions.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	const op = "openaiembed.Embed"
	body, _ := json.Marshal(request{Model: e.o.Model, Input: texts, Dimensions: knowledge.Dimensions})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.o.BaseURL+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.o.Key != "" {
		req.Header.Set("Authorization", "Bearer "+e.o.Key)
	}
	res, err := e.o.HTTP.Do(req)
	if err != nil {
		return nil, errs.E(op, errs.Unavailable, "EMBEDDING_UNAVAILABLE", "the embedding endpoint could not be reached; retry shortly").WithCause(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	if err != nil || res.StatusCode != http.StatusOK {
		return nil, errs.E(op, errs.Unavailable, "EMBEDDING_UNAVAILABLE", "the embedding endpoint failed; retry shortly").WithCause(fmt.Errorf("status %d: %v", res.StatusCode, err))
	}
	var r response
	if err := json.Unmarshal(b, &r); err != nil || len(r.Data) != len(texts) {
		return nil, errs.E(op, errs.Internal, "", "the embedding endpoint answered no vector per text").WithCause(err)
	}
	out := make([][]float32, len(texts))
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= len(out) || len(d.Embedding) != knowledge.Dimensions {
			return nil, errs.E(op, errs.Internal, "", fmt.Sprintf("the embedding endpoint answered a vector of %d dimensions; %d are needed", len(d.Embedding), knowledge.Dimensions))
		}
		v := d.Embedding
		knowledge.Normalize(v)
		out[d.Index] = v
	}
	for i, v := range out {
		if v == nil {
			return nil, errs.E(op, errs.Internal, "", fmt.Sprintf("the embedding endpoint answered no vector for text %d", i))
		}
	}
	return out, nil
}

var _ knowledge.Embedder = (*Embedder)(nil)
