package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/workflowchat/service/shared/truncate"
)

// BuiltinID is the id of the built-in offline model.
const BuiltinID = "builtin"

// Builtin is the built-in offline model (its rules: docs/decisions.md, Models): a
// deterministic assistant that needs no network and no credentials, so the
// whole product works locally and in tests.
//
// In chat it replies in several chunks. When the last user message names an
// offered tool and gives a JSON object, e.g. `run json_query with {"query":
// ".a", "input": {"a": 1}}`, it calls that tool; given the tool's result it
// calls the next offered tool the message names with a JSON object after
// the first one's, if any (`run json_query with {...} then hash with
// {...}`), one call per turn, and otherwise reports the results.
type Builtin struct {
	// ChunkDelay paces the chunks of a reply (BUILTIN_CHUNK_DELAY), to
	// demonstrate and test streaming, keep-alives and disconnects.
	ChunkDelay time.Duration
}

// Models lists the built-in model. It takes every attachment, and says
// what it received.
func (Builtin) Models() []Model {
	return []Model{{ID: BuiltinID, Name: "Built-in offline assistant", Provider: "builtin", Input: Input{Images: true, Documents: true}}}
}

// CountInput is the built-in model's input tokens of req (model.InputCounter):
// the words (strings.Fields) of the system prompt and of every message's
// content, plus one per tool call of an assistant turn. Offered tools
// cost nothing.
func (Builtin) CountInput(req Request) int {
	words := len(strings.Fields(req.System))
	for _, m := range req.Messages {
		words += len(strings.Fields(m.Content)) + len(m.ToolCalls)
		for _, a := range m.Attachments {
			words += len(strings.Fields(a.Text)) + len(a.Data)/1024 // images and PDFs: a word per KB
		}
	}
	return words
}

// Generate answers one turn deterministically. Usage is reported as word
// counts: CountInput in, the words emitted out. With req.MaxTokens set the
// reply stops after that many words (a tool call is still made). It fails
// only with ctx's or emit's error.
func (b Builtin) Generate(ctx context.Context, req Request, emit func(Chunk) error) (Result, error) {
	var res Result
	res.Usage.InputTokens = b.CountInput(req)

	last := lastMessage(req.Messages)
	if n, ok := countRequest(last); ok {
		if req.MaxTokens > 0 {
			n = min(n, req.MaxTokens)
		}
		var err error
		res.Usage.OutputTokens, err = countSlowly(ctx, n, emit)
		return res, err
	}
	var reply string
	switch {
	case last.Role == RoleTool:
		if call, ok := nextToolCall(req.Messages, req.Tools); ok {
			res.ToolCalls = []ToolCall{call}
			reply = fmt.Sprintf("Running %s.", call.Name)
		} else {
			reply = toolReport(req.Messages)
		}
	default:
		if call, ok := findToolCall(last.Content, req.Tools, len(req.Messages)); ok {
			res.ToolCalls = []ToolCall{call}
			reply = fmt.Sprintf("Running %s.", call.Name)
		} else {
			reply = builtinReply(last.Content, req.Tools)
		}
		if last.Role == RoleUser && len(last.Attachments) > 0 {
			reply = "I received " + DescribeAttachments(last.Attachments) + ". " + reply
		}
	}
	if req.MaxTokens > 0 {
		reply = firstWords(reply, req.MaxTokens)
	}
	res.Usage.OutputTokens = len(strings.Fields(reply))
	for i, c := range ChunkWords(reply, 4) {
		if i > 0 && b.ChunkDelay > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(b.ChunkDelay):
			}
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := emit(Chunk{Delta: c}); err != nil {
			return res, err
		}
	}
	return res, nil
}

// countPattern is the built-in model's slow reply, for trying resume and
// stop: "count to N slowly".
// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package.
var countPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)^\s*count to (\d{1,3}) slowly\W*$`) })

// CountInterval is the pause between the numbers of "count to N slowly".
const CountInterval = 100 * time.Millisecond

// MaxCount is the largest N of "count to N slowly".
const MaxCount = 200

// countRequest reports whether m asks to count to N slowly, 1 <= N <=
// MaxCount.
func countRequest(m Message) (int, bool) {
	if m.Role != RoleUser {
		return 0, false
	}
	sub := countPattern().FindStringSubmatch(m.Content)
	if sub == nil {
		return 0, false
	}
	n, err := strconv.Atoi(sub[1])
	return n, err == nil && n >= 1 && n <= MaxCount
}

// countSlowly emits "1 ", "2 ", ... "n " one per chunk, CountInterval
// apart, and returns how many it emitted. It fails with ctx's or emit's
// error.
func countSlowly(ctx context.Context, n int, emit func(Chunk) error) (int, error) {
	t := time.NewTicker(CountInterval)
	defer t.Stop()
	for i := 1; i <= n; i++ {
		if i > 1 {
			select {
			case <-ctx.Done():
				return i - 1, ctx.Err()
			case <-t.C:
			}
		}
		if err := emit(Chunk{Delta: strconv.Itoa(i) + " "}); err != nil {
			return i - 1, err
		}
	}
	return n, nil
}

func lastMessage(ms []Message) Message {
	if len(ms) == 0 {
		return Message{Role: RoleUser}
	}
	return ms[len(ms)-1]
}

// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package. A word is a built-in
// tool's id or a remote tool's whole id (mcp/<server>/<tool>, the tool's
// name not ending in a dot, so that a sentence's full stop is not part
// of it).
var wordRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`[a-z][a-z0-9_]*(?:/[a-z][a-z0-9_]*/(?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?)?`)
})

// findToolCall looks for the first offered tool id named in text and a JSON
// object after it.
func findToolCall(text string, tools []ToolSpec, n int) (ToolCall, bool) {
	return findToolCallAt(text, tools, 0, n)
}

// findToolCallAt looks for the k-th (from 0) call text asks for: an
// offered tool id named and a JSON object after it, each after the end
// of the one before. The search stops at an offered tool id with no JSON
// object after it.
func findToolCallAt(text string, tools []ToolSpec, k, n int) (ToolCall, bool) {
	offered := map[string]bool{}
	for _, t := range tools {
		offered[t.Name] = true
	}
	for {
		call, end, ok := firstToolCall(text, offered, n)
		if !ok || k == 0 {
			return call, ok
		}
		text, k = text[end:], k-1
	}
}

// firstToolCall finds the first call text asks for, and where its JSON
// object ends.
func firstToolCall(text string, offered map[string]bool, n int) (ToolCall, int, bool) {
	for _, loc := range wordRE().FindAllStringIndex(text, -1) {
		name := text[loc[0]:loc[1]]
		if !offered[name] {
			continue
		}
		rest := text[loc[1]:]
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return ToolCall{}, 0, false
		}
		var args json.RawMessage
		dec := json.NewDecoder(strings.NewReader(rest[i:]))
		if err := dec.Decode(&args); err != nil {
			return ToolCall{}, 0, false
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, args); err != nil {
			return ToolCall{}, 0, false
		}
		end := loc[1] + i + int(dec.InputOffset())
		return ToolCall{ID: fmt.Sprintf("call_%d", n), Name: name, Args: compact.Bytes()}, end, true
	}
	return ToolCall{}, 0, false
}

// nextToolCall is the call after those made since the last user message
// (the next one that message asks for), if any.
func nextToolCall(ms []Message, tools []ToolSpec) (ToolCall, bool) {
	made := 0
	for i := len(ms) - 1; i >= 0; i-- {
		switch ms[i].Role {
		case RoleAssistant:
			made += len(ms[i].ToolCalls)
		case RoleUser:
			if made == 0 {
				return ToolCall{}, false
			}
			return findToolCallAt(ms[i].Content, tools, made, len(ms))
		}
	}
	return ToolCall{}, false
}

// toolReport summarises the tool results that follow the last assistant
// turn with tool calls.
func toolReport(ms []Message) string {
	var parts []string
	for i := len(ms) - 1; i >= 0 && ms[i].Role == RoleTool; i-- {
		parts = append([]string{ms[i].Content}, parts...)
	}
	var names []string
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == RoleAssistant && len(ms[i].ToolCalls) > 0 {
			for _, c := range ms[i].ToolCalls {
				names = append(names, c.Name)
			}
			break
		}
	}
	return fmt.Sprintf("The %s tool returned: %s", strings.Join(names, ", "), strings.Join(parts, "; "))
}

// maxQuoted bounds the prompt the built-in reply quotes, in bytes.
const maxQuoted = 200

func builtinReply(prompt string, tools []ToolSpec) string {
	p := strings.TrimSpace(prompt)
	if p == "" {
		return "Hello! I am the built-in offline assistant. Ask me anything, or ask me to run a tool."
	}
	p = truncate.Ellipsis(p, maxQuoted)
	reply := fmt.Sprintf("You said: %q. I am the built-in offline assistant: I answer without a network.", p)
	if len(tools) > 0 {
		reply += " I can run a tool when you name it with JSON arguments, for example: " +
			`run json_query with {"query": ".a", "input": {"a": 1}}.`
	}
	return reply
}

// firstWords returns s up to the end of its n-th word (words as
// strings.Fields splits them), s itself when it has no more.
func firstWords(s string, n int) string {
	in, count := false, 0
	for i, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			if count == n {
				return strings.TrimRightFunc(s[:i], unicode.IsSpace)
			}
			count++
		}
		in = !space
	}
	return s
}

// ChunkWords splits s into pieces of n words each, keeping the spaces, so
// that the pieces concatenate back to s.
func ChunkWords(s string, n int) []string {
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
