package model

import (
	"context"
	"fmt"
	"strings"
)

// BuiltinID is the id of the built-in offline model.
const BuiltinID = "builtin"

// Builtin is the built-in offline model (DESIGN.md section 4): a
// deterministic assistant that needs no network and no credentials, so the
// whole product works locally and in tests.
type Builtin struct{}

// Models lists the built-in model.
func (Builtin) Models() []Model {
	return []Model{{ID: BuiltinID, Name: "Built-in offline assistant", Provider: "builtin"}}
}

// Generate streams a deterministic reply to the last user message, a few
// words per chunk. It reports usage as word counts.
func (Builtin) Generate(ctx context.Context, req Request, emit func(Chunk) error) (Usage, error) {
	var last string
	words := 0
	for _, m := range req.Messages {
		words += len(strings.Fields(m.Content))
		if m.Role == "user" {
			last = m.Content
		}
	}
	reply := builtinReply(last)
	usage := Usage{InputTokens: words + len(strings.Fields(req.System)), OutputTokens: len(strings.Fields(reply))}
	for _, c := range chunkWords(reply, 4) {
		if err := ctx.Err(); err != nil {
			return usage, err
		}
		if err := emit(Chunk{Delta: c}); err != nil {
			return usage, err
		}
	}
	return usage, nil
}

func builtinReply(prompt string) string {
	p := strings.TrimSpace(prompt)
	if p == "" {
		return "Hello! I am the built-in offline assistant. Ask me anything, or ask me to run a tool."
	}
	quoted := p
	if len(quoted) > 200 {
		quoted = quoted[:200] + "..."
	}
	return fmt.Sprintf("You said: %q. I am the built-in offline assistant: I answer without a network, "+
		"and I can run a tool when you name it with JSON arguments, for example: "+
		"run json_query with {\"query\": \".a\", \"input\": {\"a\": 1}}.", quoted)
}

// chunkWords splits s into pieces of n words, keeping the spaces, so that
// the pieces concatenate back to s.
func chunkWords(s string, n int) []string {
	var out []string
	start, count := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			count++
			if count == n {
				out = append(out, s[start:i+1])
				start, count = i+1, 0
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
