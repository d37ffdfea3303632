package workflow_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/workflow"
)

func TestEncodeStepsDecodesAsMarshal(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	n := 3
	big := map[string]any{"rows": []any{map[string]any{"a": 1.5, "b": "<&>"}, "x"}, "n": nil}
	tests := []struct {
		name  string
		steps []workflow.RunStep
	}{
		{"nil", nil},
		{"none", []workflow.RunStep{}},
		{"empty step", []workflow.RunStep{{}}},
		{"empty values left out", []workflow.RunStep{{ID: "a", Input: map[string]any{}, Output: map[string]any{}}}},
		{"only values", []workflow.RunStep{{Input: map[string]any{"q": "."}}, {Output: big}}},
		{"every member", []workflow.RunStep{{ID: "a", ToolID: "json_query", Status: workflow.StepCompleted, StartedAt: &now,
			CompletedAt: &now, Input: map[string]any{"query": ".a", "input": big}, Output: big, Error: "e", Truncated: true,
			Reused: true, ElementsDone: &n, ExpiresAt: &now, RetryAt: &now, ChildRunID: "c"},
			{ID: "b", Status: workflow.StepPending}}},
		{"same value twice", []workflow.RunStep{{ID: "a", Output: big}, {ID: "b", Input: big, Output: big}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			steps := tt.steps
			if steps == nil {
				steps = []workflow.RunStep{}
			}
			want, err := json.Marshal(steps)
			if err != nil {
				t.Fatal(err)
			}
			c := workflow.NewValueJSON()
			for round := range 2 { // the second from memory
				got, err := workflow.EncodeSteps(tt.steps, c)
				if err != nil {
					t.Fatal(err)
				}
				var g, w any
				if err := json.Unmarshal(got, &g); err != nil {
					t.Fatalf("round %d: %s is not JSON: %v", round, got, err)
				}
				if err := json.Unmarshal(want, &w); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(g, w) {
					t.Fatalf("round %d:\n got %s\nwant %s", round, got, want)
				}
				var back []workflow.RunStep
				if err := json.Unmarshal(got, &back); err != nil || len(back) != len(steps) {
					t.Fatalf("round %d: decode as steps: %v (%d steps)", round, err, len(back))
				}
			}
			if plain, _ := workflow.EncodeSteps(tt.steps, nil); string(plain) != string(want) {
				t.Fatalf("without memory: %s, want %s", plain, want)
			}
		})
	}
}

func TestValueJSONRemembersByIdentityAndForgets(t *testing.T) {
	t.Parallel()
	c := workflow.NewValueJSON()
	a := map[string]any{"v": 1}
	b := map[string]any{"v": 1} // equal, another value
	c.Remember(a, []byte(`{"v":"as remembered"}`))
	if got, _ := c.Encode(a); string(got) != `{"v":"as remembered"}` {
		t.Fatalf("a: %s, want the remembered JSON", got)
	}
	if got, _ := c.Encode(b); string(got) != `{"v":1}` {
		t.Fatalf("b: %s, want its own encoding", got)
	}
	if got, _ := c.Encode(nil); string(got) != "null" {
		t.Fatalf("nil: %s", got)
	}
	if c.Len() != 2 {
		t.Fatalf("remembers %d values, want 2", c.Len())
	}
	run := workflow.Run{Steps: []workflow.RunStep{{Input: b}}}
	c.Retain(&run)
	if c.Len() != 1 {
		t.Fatalf("after Retain remembers %d values, want 1 (b)", c.Len())
	}
	if got, _ := c.Encode(a); string(got) != `{"v":1}` {
		t.Fatalf("a after being forgotten: %s, want it encoded again", got)
	}
	large := map[string]any{"text": strings.Repeat("x", workflow.MaxRememberedBytes)}
	before := c.Len()
	if got, _ := c.Encode(large); len(got) <= workflow.MaxRememberedBytes || c.Len() != before {
		t.Fatalf("a value of %d bytes of JSON: remembers %d values, want it encoded and not kept (%d)", len(got), c.Len(), before)
	}
	var none *workflow.ValueJSON
	none.Remember(a, []byte("x"))
	none.Retain(&run)
	if got, _ := none.Encode(a); string(got) != `{"v":1}` || none.Len() != 0 {
		t.Fatalf("nil ValueJSON: %s", got)
	}
}

// TestSameRecord: a step is the SameRecord of a copy of itself, and of
// no step that differs in any one encoded field. Each field of RunStep is
// changed in turn through reflection, so a field added to RunStep that
// SameRecord does not compare fails here.
func TestSameRecord(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	later := now.Add(time.Second)
	two := 2
	base := workflow.RunStep{ID: "a", ToolID: "json_query", Status: workflow.StepCompleted, StartedAt: &now, CompletedAt: &later,
		Input: map[string]any{"q": "."}, Output: map[string]any{"r": 1.0}, Error: "e", ElementsDone: &two,
		ExpiresAt: &later, Attempts: []workflow.StepAttempt{{Attempt: 1, StartedAt: &now, Status: "failed", Error: "x"}},
		RetryAt: &later, InputURL: "u", OutputURL: "v", ChildRunID: "c", Reason: "r", MCPServerID: "m", AuthorizationURL: "w", AuthorizationWaitedMs: 5, RetryWaitedMs: 7}
	cp := base
	nowCopy, laterCopy := now, later
	cp.StartedAt, cp.CompletedAt = &nowCopy, &laterCopy // other pointers, same times
	cp.Attempts = append([]workflow.StepAttempt(nil), base.Attempts...)
	if !base.SameRecord(cp) {
		t.Fatal("a step is not the SameRecord of its copy")
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Tag.Get("json") == "-" {
			continue // not encoded
		}
		t.Run(f.Name, func(t *testing.T) {
			other := cp
			v := reflect.ValueOf(&other).Elem().Field(i)
			switch v.Kind() {
			case reflect.String:
				v.SetString(v.String() + "!")
			case reflect.Bool:
				v.SetBool(!v.Bool())
			case reflect.Int64, reflect.Int:
				v.SetInt(v.Int() + 1)
			case reflect.Map: // the same content in another map
				m := reflect.MakeMap(v.Type())
				for _, k := range v.MapKeys() {
					m.SetMapIndex(k, v.MapIndex(k))
				}
				v.Set(m)
			case reflect.Slice:
				v.Set(reflect.Append(v, v.Index(0)))
			case reflect.Pointer:
				switch p := v.Interface().(type) {
				case *time.Time:
					x := p.Add(time.Nanosecond)
					v.Set(reflect.ValueOf(&x))
				case *int:
					x := *p + 1
					v.Set(reflect.ValueOf(&x))
				default:
					t.Fatalf("field %s of type %s: teach this test and SameRecord", f.Name, f.Type)
				}
			default:
				t.Fatalf("field %s of type %s: teach this test and SameRecord", f.Name, f.Type)
			}
			if base.SameRecord(other) || other.SameRecord(base) {
				t.Errorf("steps differing in %s are the SameRecord", f.Name)
			}
		})
	}
	t.Run("attempt_changed_in_place", func(t *testing.T) {
		other := cp
		other.Attempts = []workflow.StepAttempt{base.Attempts[0]}
		other.Attempts[0].Status = "completed"
		if base.SameRecord(other) {
			t.Error("steps whose attempt differs are the SameRecord")
		}
	})
	t.Run("nil_and_set_time", func(t *testing.T) {
		other := cp
		other.RetryAt = nil
		if base.SameRecord(other) || other.SameRecord(base) {
			t.Error("a nil time and a set one are the SameRecord")
		}
	})
}
