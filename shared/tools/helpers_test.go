package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tools"
)

// fixedNow is the clock of the registries built by newRegistry.
var fixedNow = time.Date(2024, 5, 1, 12, 30, 0, 0, time.UTC)

// newRegistry builds a registry of the built-in tools with cfg, defaulting
// its clock to fixedNow.
func newRegistry(t testing.TB, cfg tools.Config) *tools.Registry {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return fixedNow }
	}
	r, err := tools.NewRegistry(tools.Builtin(cfg)...)
	if err != nil {
		t.Fatalf("NewRegistry(Builtin): %v", err)
	}
	return r
}

// toolCase is one call of a tool through Registry.Run: either a success
// with the expected output (compared as JSON) and/or a check function, or a
// failure with the expected code, a message substring and, for
// INVALID_PARAMS, a detail field.
type toolCase struct {
	name  string
	input map[string]any
	want  map[string]any
	check func(t *testing.T, out map[string]any)
	code  string // expected error code; "" means success
	msg   string // substring of the error message
	field string // a field expected among the error details
	// isoCode and isoMsg, when set, replace code and msg in a worker, where
	// one of its limits stops the case first.
	isoCode, isoMsg string
}

// runToolCases runs each case in parallel against tool id of r. Every
// successful output is also validated against the tool's output schema.
// An Isolated tool runs each case twice: in process, and in a real worker
// process (subtests "isolated/..."), whose output is compared as the JSON
// clients receive.
func runToolCases(t *testing.T, r *tools.Registry, id string, cases []toolCase) {
	t.Helper()
	tool, err := r.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	type variant struct {
		prefix string
		r      *tools.Registry
	}
	variants := []variant{{"", r}}
	if tool.Isolated {
		variants = append(variants, variant{"isolated/", r.WithSandbox(testSandbox(t))})
	}
	for _, tc := range cases {
		for _, v := range variants {
			t.Run(v.prefix+tc.name, func(t *testing.T) {
				t.Parallel()
				runToolCase(t, v.r, id, tc, v.prefix != "")
			})
		}
	}
}

func runToolCase(t *testing.T, r *tools.Registry, id string, tc toolCase, isolated bool) {
	out, err := r.Run(t.Context(), id, tc.input)
	if isolated && tc.isoCode != "" {
		tc.code, tc.msg = tc.isoCode, tc.isoMsg
	}
	if tc.code != "" {
		assertErr(t, err, tc.code, tc.msg, tc.field)
		return
	}
	if err != nil {
		t.Fatalf("Run(%s, %v) failed: %v", id, tc.input, err)
	}
	if isolated {
		out = decodedOutput(t, out)
	}
	if err := r.ValidateOutput(id, out); err != nil {
		t.Fatalf("output %v does not match the output schema: %v (%v)", out, err, errDetails(err))
	}
	if tc.want != nil {
		if got, want := jsonOf(t, out), jsonOf(t, tc.want); got != want {
			t.Fatalf("output\n got  %s\n want %s", got, want)
		}
	}
	if tc.check != nil {
		tc.check(t, out)
	}
	if tc.want == nil && tc.check == nil {
		t.Fatal("case asserts nothing")
	}
}

// decodedOutput returns an isolated tool's output (json.RawMessage
// values) decoded as a client decodes it.
func decodedOutput(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// assertErr checks that err is an *errs.Error with the given code, a
// message containing msg and, when field is set, a detail for field.
func assertErr(t *testing.T, err error, code, msg, field string) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *errs.Error with code %s", err, err, code)
	}
	if got := e.CodeOrDefault(); got != code {
		t.Fatalf("code = %s (%v), want %s", got, err, code)
	}
	if wantKind := kindOf(code); e.Kind != wantKind {
		t.Errorf("kind = %v, want %v", e.Kind, wantKind)
	}
	if !strings.Contains(e.Message, msg) {
		t.Errorf("message = %q, want it to contain %q", e.Message, msg)
	}
	if field != "" {
		found := false
		for _, d := range e.Details {
			found = found || d.Field == field
		}
		if !found {
			t.Errorf("details %v do not name field %q", e.Details, field)
		}
	}
	if code == tools.CodeInvalidParams && len(e.Details) == 0 {
		t.Errorf("INVALID_PARAMS without details: %v", err)
	}
}

// kindOf is the errs.Kind the Registry uses for a code.
func kindOf(code string) errs.Kind {
	switch code {
	case tools.CodeToolNotFound:
		return errs.NotFound
	case tools.CodeInvalidParams:
		return errs.Invalid
	case tools.CodeToolTimeout:
		return errs.Timeout
	default:
		return errs.Internal
	}
}

func errDetails(err error) []errs.FieldError {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Details
	}
	return nil
}

// jsonOf returns v as canonical JSON (sorted keys, numbers as JSON has them).
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %v: %v", v, err)
	}
	var canon any
	if err := json.Unmarshal(b, &canon); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(canon)
	return string(b)
}

// fakeGenerator records its calls and answers with reply or err.
type fakeGenerator struct {
	mu    sync.Mutex
	calls []genCall
	reply string
	err   error
	block bool // wait for the context to end
}

type genCall struct {
	model, system, prompt string
	maxTokens             int
}

func (g *fakeGenerator) GenerateText(ctx context.Context, req tools.TextRequest) (tools.TextResult, error) {
	g.mu.Lock()
	g.calls = append(g.calls, genCall{req.ModelID, req.System, req.Prompt, req.MaxTokens})
	g.mu.Unlock()
	if g.block {
		<-ctx.Done()
		return tools.TextResult{}, ctx.Err()
	}
	if g.err != nil {
		return tools.TextResult{InputTokens: 1}, g.err
	}
	return tools.TextResult{Text: g.reply + " <" + req.Prompt + ">", InputTokens: len(req.Prompt), OutputTokens: 2}, nil
}

func (g *fakeGenerator) lastCall(t *testing.T) genCall {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.calls) == 0 {
		t.Fatal("generator was not called")
	}
	return g.calls[len(g.calls)-1]
}
