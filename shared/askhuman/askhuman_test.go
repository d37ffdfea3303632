package askhuman_test

import (
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/askhuman"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/tools"
)

// TestHumanStepContract: Parse takes what the ask_human tool's
// input schema takes and refuses, naming the field, what it refuses; an
// Answer's output matches the tool's output schema.
func TestHumanStepContract(t *testing.T) {
	t.Parallel()
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		in    map[string]any
		field string // "" means valid
		want  askhuman.Request
	}{
		{"message only", map[string]any{"message": "Go?"}, "", askhuman.Request{Message: "Go?", OnTimeout: "fail"}},
		{"everything", map[string]any{"message": "Go?", "inputSchema": map[string]any{"type": "object"}, "timeoutSeconds": 3600.0, "onTimeout": "continue"}, "",
			askhuman.Request{Message: "Go?", InputSchema: []byte(`{"type":"object"}`), Timeout: time.Hour, OnTimeout: "continue"}},
		{"30 days", map[string]any{"message": "Go?", "timeoutSeconds": 2592000.0}, "", askhuman.Request{Message: "Go?", Timeout: 30 * 24 * time.Hour, OnTimeout: "fail"}},
		{"no message", map[string]any{}, "message", askhuman.Request{}},
		{"blank message", map[string]any{"message": "  "}, "message", askhuman.Request{}},
		{"long message", map[string]any{"message": strings.Repeat("m", 4001)}, "message", askhuman.Request{}},
		{"schema not an object", map[string]any{"message": "x", "inputSchema": "object"}, "inputSchema", askhuman.Request{}},
		{"timeout 0", map[string]any{"message": "x", "timeoutSeconds": 0.0}, "timeoutSeconds", askhuman.Request{}},
		{"timeout over 30 days", map[string]any{"message": "x", "timeoutSeconds": 2592001.0}, "timeoutSeconds", askhuman.Request{}},
		{"timeout fractional", map[string]any{"message": "x", "timeoutSeconds": 1.5}, "timeoutSeconds", askhuman.Request{}},
		{"onTimeout unknown", map[string]any{"message": "x", "onTimeout": "retry"}, "onTimeout", askhuman.Request{}},
		{"unknown input", map[string]any{"message": "x", "extra": 1.0}, "extra", askhuman.Request{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := askhuman.Parse(c.in)
			toolErr := reg.Validate(tools.AskHumanID, c.in)
			if c.field == "" {
				if err != nil || got.Message != c.want.Message || string(got.InputSchema) != string(c.want.InputSchema) || got.Timeout != c.want.Timeout || got.OnTimeout != c.want.OnTimeout {
					t.Fatalf("Parse = %+v, %v; want %+v", got, err, c.want)
				}
				if toolErr != nil {
					t.Errorf("the tool's schema refuses what the engine takes: %v", toolErr)
				}
				return
			}
			e, ok := err.(*errs.Error)
			if !ok || e.Code != "INVALID_PARAMS" || len(e.Details) == 0 || e.Details[0].Field != c.field {
				t.Fatalf("Parse = %v, want INVALID_PARAMS naming %s", err, c.field)
			}
			if toolErr == nil {
				t.Errorf("the tool's schema takes what the engine refuses")
			}
		})
	}
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for _, a := range []askhuman.Answer{{Approved: true, Values: map[string]any{"note": "ok"}, RespondedAt: at}, {RespondedAt: at, TimedOut: true}} {
		out := a.Output()
		if err := reg.ValidateOutput(tools.AskHumanID, out); err != nil {
			t.Errorf("output %v does not match the tool's output schema: %v", out, err)
		}
		tool, _ := reg.Get(tools.AskHumanID)
		for _, name := range tool.Outputs() {
			if _, ok := out[name]; !ok {
				t.Errorf("output %v lacks the declared output %s", out, name)
			}
		}
	}
}
