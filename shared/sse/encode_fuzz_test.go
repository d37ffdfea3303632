package sse_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	gosse "github.com/tmaxmax/go-sse"

	"github.com/workflowchat/service/shared/sse"
)

// fuzzEvent has the shape of the chat stream's events (chat.Event): string
// fields that carry model output and tool data, and raw JSON fields.
type fuzzEvent struct {
	Type      string          `json:"type"`
	MessageID string          `json:"messageId,omitempty"`
	Delta     string          `json:"delta,omitempty"`
	ToolName  string          `json:"toolName,omitempty"`
	ToolArgs  json.RawMessage `json:"toolArgs,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	Message   string          `json:"message,omitempty"`
}

// fuzzReadConfig lets the parser take events as large as a fuzz input.
var fuzzReadConfig = &gosse.ReadConfig{MaxEventSize: 16 << 20}

// fuzzSseSeeds are content strings that try to break or forge events.
var fuzzSseSeeds = []string{
	"",
	"hello",
	"line1\nline2",
	"a\n\nb",
	"\r\n\r\n",
	"\r",
	"data: forged\n\n",
	"\n\ndata: {\"type\":\"end\"}\n\n",
	"event: error\ndata: x\n\n",
	"id: 7\nretry: 1\n\n",
	": comment\n\n",
	"data:",
	"\x00\x01\x1f\x7f",
	"\u2028\u2029\u0085",
	"<script>&amp;</script>",
	"\"quoted\" \\ back\\slash",
	"\xff\xfe invalid utf-8 \xc3",
	"ünïcödé 🤖 日本語",
	"\ufeffbom",
}

// FuzzEncode encodes events carrying arbitrary content with sse.Encode.
// Properties: the output is exactly one line "data: <JSON>" followed by a
// blank line (it starts with the one "data: " prefix, ends with "\n\n",
// and holds no other "\n" or "\r", so no content can end the event early
// or start a field); go-sse's parser reads back exactly one unnamed event
// without an id whose data is that JSON; and the data decodes to the event
// sent (strings with invalid UTF-8 as encoding/json repairs them, raw JSON
// fields as the same JSON value). The same holds for a bare string value.
func FuzzEncode(f *testing.F) {
	for i, s := range fuzzSseSeeds {
		f.Add(s, fuzzSseSeeds[(i+3)%len(fuzzSseSeeds)], []byte(`{"q":"data: x\n\n"}`))
	}
	f.Add("x", "y", []byte("{\n\"a\" :\r\n [1, 2]\n}"))
	f.Add("x", "y", []byte(`"\n\ndata: forged\n\n"`))
	f.Fuzz(func(t *testing.T, content, text string, raw []byte) {
		ev := fuzzEvent{Type: "content", MessageID: text, Delta: content, ToolName: text, Error: content, Message: text}
		if json.Valid(raw) {
			ev.ToolArgs, ev.Result = raw, raw
		}
		out, err := sse.Encode(ev)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		data := fuzzCheckFrame(t, out)
		events := fuzzReadAll(t, out)
		if len(events) != 1 {
			t.Fatalf("Encode(%+v) = %q: parsed %d events, want 1", ev, out, len(events))
		}
		fuzzCheckEvent(t, events[0], data, ev)

		// A bare string value.
		out, err = sse.Encode(content)
		if err != nil {
			t.Fatalf("Encode(string): %v", err)
		}
		data = fuzzCheckFrame(t, out)
		events = fuzzReadAll(t, out)
		if len(events) != 1 || events[0].Data != data {
			t.Fatalf("Encode(%q) = %q: parsed %+v", content, out, events)
		}
		var s string
		if err := json.Unmarshal([]byte(data), &s); err != nil || s != fuzzRepaired(content) {
			t.Fatalf("Encode(%q): data %q decodes to %q (%v)", content, data, s, err)
		}
	})
}

// FuzzEncodeStream writes a whole reply through sse.Writer to a recorder:
// start, the content split into deltas (chunk sizes from the fuzzer, cut
// at rune boundaries), keep-alive comments between them, a tool call and
// result, an error and end. Properties: go-sse parses back exactly the
// events sent, in order, none named and none with an id; each one's data
// decodes to the event sent; the deltas concatenate to the content; the
// stream is a sequence of well-formed frames.
func FuzzEncodeStream(f *testing.F) {
	for i, s := range fuzzSseSeeds {
		f.Add(s, fuzzSseSeeds[(i+5)%len(fuzzSseSeeds)], uint8(i), []byte(`{"args":"\n\n"}`))
	}
	f.Add("data: a\n\ndata: b\n\nevent: end\n\n", "tool\nname", uint8(1), []byte(`null`))
	f.Fuzz(func(t *testing.T, content, text string, chunk uint8, raw []byte) {
		var sent []fuzzEvent
		sent = append(sent, fuzzEvent{Type: "start", MessageID: text})
		for _, d := range fuzzChunks(content, int(chunk%16)+1) {
			sent = append(sent, fuzzEvent{Type: "content", Delta: d})
		}
		call := fuzzEvent{Type: "tool_call", ToolName: text}
		result := fuzzEvent{Type: "tool_result", ToolName: text}
		if json.Valid(raw) {
			call.ToolArgs, result.Result = raw, raw
		}
		sent = append(sent, call, result,
			fuzzEvent{Type: "error", Error: "MODEL_ERROR", Message: content},
			fuzzEvent{Type: "end", MessageID: text})

		rec := httptest.NewRecorder()
		w := sse.NewWriter(rec)
		for i, ev := range sent {
			if err := w.Send(ev); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if i%3 == 1 {
				if err := w.Comment("ping"); err != nil {
					t.Fatalf("Comment: %v", err)
				}
			}
		}
		if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("Content-Type %q", ct)
		}
		stream := rec.Body.Bytes()
		var frames [][]byte
		for rest := stream; len(rest) > 0; {
			i := bytes.Index(rest, []byte("\n\n"))
			if i < 0 {
				t.Fatalf("stream %q ends inside a frame", stream)
			}
			frames, rest = append(frames, rest[:i+2]), rest[i+2:]
		}
		var datas []string
		for _, fr := range frames {
			if bytes.Equal(fr, []byte(": ping\n\n")) {
				continue
			}
			datas = append(datas, fuzzCheckFrame(t, fr))
		}
		if len(datas) != len(sent) {
			t.Fatalf("stream %q: %d event frames, sent %d events", stream, len(datas), len(sent))
		}
		events := fuzzReadAll(t, stream)
		if len(events) != len(sent) {
			t.Fatalf("stream %q: parsed %d events, sent %d", stream, len(events), len(sent))
		}
		var deltas strings.Builder
		for i, ev := range events {
			got := fuzzCheckEvent(t, ev, datas[i], sent[i])
			deltas.WriteString(got.Delta)
		}
		if deltas.String() != fuzzRepaired(content) {
			t.Fatalf("deltas concatenate to %q, want %q", deltas.String(), fuzzRepaired(content))
		}
	})
}

// fuzzCheckFrame checks that b is one event frame, "data: <JSON>\n\n" with no
// other line break, and returns the JSON.
func fuzzCheckFrame(t *testing.T, b []byte) string {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("data: ")) || !bytes.HasSuffix(b, []byte("\n\n")) || len(b) < len("data: \n\n") {
		t.Fatalf("frame %q is not data: ...\\n\\n", b)
	}
	data := b[len("data: ") : len(b)-2]
	if bytes.ContainsAny(data, "\r\n") {
		t.Fatalf("frame %q has a line break inside its data", b)
	}
	if bytes.Count(b, []byte("\n\n")) != 1 || bytes.Count(b, []byte("data:")) < 1 || !json.Valid(data) {
		t.Fatalf("frame %q is malformed", b)
	}
	return string(data)
}

// fuzzReadAll parses b with go-sse.
func fuzzReadAll(t *testing.T, b []byte) []gosse.Event {
	t.Helper()
	var out []gosse.Event
	for ev, err := range gosse.Read(bytes.NewReader(b), fuzzReadConfig) {
		if err != nil {
			t.Fatalf("go-sse: %v reading %q", err, b)
		}
		out = append(out, ev)
	}
	return out
}

// fuzzCheckEvent checks a parsed event against the frame's data and the event
// sent, and returns the decoded event.
func fuzzCheckEvent(t *testing.T, ev gosse.Event, data string, sent fuzzEvent) fuzzEvent {
	t.Helper()
	if ev.Type != "" || ev.LastEventID != "" {
		t.Fatalf("parsed event %+v has a forged type or id", ev)
	}
	if ev.Data != data {
		t.Fatalf("parsed data %q, frame data %q", ev.Data, data)
	}
	var got fuzzEvent
	dec := json.NewDecoder(strings.NewReader(ev.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil || dec.More() {
		t.Fatalf("data %q does not decode to one event: %v", ev.Data, err)
	}
	want := sent
	for _, p := range []*string{&want.Type, &want.MessageID, &want.Delta, &want.ToolName, &want.Error, &want.Message} {
		*p = fuzzRepaired(*p)
	}
	if !fuzzSameJSON(got.ToolArgs, want.ToolArgs) || !fuzzSameJSON(got.Result, want.Result) {
		t.Fatalf("raw fields: got %s %s, sent %s %s", got.ToolArgs, got.Result, want.ToolArgs, want.Result)
	}
	got.ToolArgs, got.Result, want.ToolArgs, want.Result = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, sent %+v", got, want)
	}
	return got
}

// fuzzRepaired is s as encoding/json transmits it: each invalid UTF-8 byte
// becomes U+FFFD.
func fuzzRepaired(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s { // ranging yields RuneError for each invalid byte
		b.WriteRune(r)
	}
	return b.String()
}

// fuzzSameJSON reports whether a and b hold the same JSON value (omitempty
// drops a null or empty raw value: absent, null and empty are all none).
func fuzzSameJSON(a, b json.RawMessage) bool {
	none := func(r json.RawMessage) bool { return len(r) == 0 }
	if none(a) || none(b) {
		return none(a) && none(b) || (none(a) && string(bytes.TrimSpace(b)) == "null") || (none(b) && string(bytes.TrimSpace(a)) == "null")
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// fuzzChunks splits s into pieces of about n bytes, at rune boundaries (an
// invalid byte is a rune of its own), as a model streams deltas.
func fuzzChunks(s string, n int) []string {
	var out []string
	start := 0
	for i := range s {
		if i-start >= n {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
