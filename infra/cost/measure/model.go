package measure

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// Pace is how fast the stand-in model answers: the wait for its first
// token, then TokensPerSecond.
type Pace struct {
	FirstToken      time.Duration
	TokensPerSecond float64
}

// Seconds is how long a reply of tokens takes at p.
func (p Pace) Seconds(tokens int) float64 {
	return p.FirstToken.Seconds() + float64(max(tokens-1, 0))/p.TokensPerSecond
}

// vocabulary are the stand-in model's tokens, about as long as a real
// model's (four characters and a space on average).
var vocabulary = strings.Fields("the reply runs on a model that streams its answer one token at a time so this text " +
	"is as long as real prose and every word costs the same bytes in events and items")

// ReplyText is the text the stand-in model answers in tokens tokens.
func ReplyText(tokens int) string {
	var b strings.Builder
	for i := range tokens {
		b.WriteString(vocabulary[i%len(vocabulary)])
		b.WriteByte(' ')
	}
	return b.String()
}

// StartModel serves the stand-in model of w: an OpenAI-compatible chat
// completions API (POST .../chat/completions, streamed) whose models
// (w.Models) answer ReplyText of their tokens at w.Pace, reached through
// the service's real OpenAI provider (ModelEnv). Close it when done.
func StartModel(w Workload) *httptest.Server {
	models, pace := w.Models(), w.Pace
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		var req struct {
			Model    string            `json:"model"`
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tokens, ok := models[req.Model]
		if !ok {
			http.Error(w, fmt.Sprintf(`{"error":{"message":"no model %q","type":"invalid_request_error"}}`, req.Model), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		flush := func() {
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		send := func(v any) bool {
			b, _ := json.Marshal(v)
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return false
			}
			flush()
			return true
		}
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": "chatcmpl-cost", "object": "chat.completion.chunk", "created": 1, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		start := time.Now().Add(pace.FirstToken)
		if !send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
			return
		}
		for i := range tokens {
			at := start.Add(time.Duration(float64(i) / pace.TokensPerSecond * float64(time.Second)))
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Until(at)):
			}
			if !send(chunk(map[string]any{"content": vocabulary[i%len(vocabulary)] + " "}, nil)) {
				return
			}
		}
		send(chunk(map[string]any{}, "stop"))
		send(map[string]any{"id": "chatcmpl-cost", "object": "chat.completion.chunk", "created": 1, "model": req.Model, "choices": []any{},
			"usage": map[string]int{"prompt_tokens": 10 * len(req.Messages), "completion_tokens": tokens, "total_tokens": 10*len(req.Messages) + tokens}})
		fmt.Fprint(w, "data: [DONE]\n\n")
		flush()
	}))
}
