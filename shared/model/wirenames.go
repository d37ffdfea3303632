package model

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
)

// maxWireName is the longest function name the providers take (OpenAI,
// Anthropic and Bedrock: ^[a-zA-Z0-9_-]{1,64}$).
const maxWireName = 64

var wireNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })

// WireName is the function name a provider is shown for the tool id: the
// id itself when the providers take it (every built-in tool's), else (a
// remote tool's mcp/<server>/<tool>) its characters outside
// [a-zA-Z0-9_-] as _, cut to leave room for _ and 8 hex digits of the
// id's SHA-256, so that two ids never share a name.
func WireName(id string) string {
	if wireNamePattern().MatchString(id) {
		return id
	}
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(id))
	name := b.String()
	if len(name) > maxWireName-9 {
		name = name[:maxWireName-9]
	}
	return name + "_" + hex.EncodeToString(sum[:4])
}

// wireNames returns req with its tools and the tool calls of its
// messages named as the providers take them (WireName), and the way back
// from those names to the ids. req itself is not changed: what is renamed
// is copied.
func wireNames(req Request) (Request, map[string]string) {
	back := map[string]string{}
	tools := make([]ToolSpec, len(req.Tools))
	for i, t := range req.Tools {
		t.Name = WireName(t.Name)
		back[t.Name] = req.Tools[i].Name
		tools[i] = t
	}
	req.Tools = tools
	msgs := make([]Message, len(req.Messages))
	for i, m := range req.Messages {
		if len(m.ToolCalls) > 0 {
			calls := make([]ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				c.Name = WireName(c.Name)
				back[c.Name] = m.ToolCalls[j].Name
				calls[j] = c
			}
			m.ToolCalls = calls
		}
		msgs[i] = m
	}
	req.Messages = msgs
	return req, back
}
