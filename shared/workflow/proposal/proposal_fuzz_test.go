package proposal

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/condition"
)

// fuzzBase is the workflow every FuzzApplyChanges proposal is made against:
// a fetch, a query of its JSON and a hash of the query's result.
func fuzzBase(byID map[string]toolclient.ToolDetail) workflow.Workflow {
	step := func(id, tool string, inputs map[string]any) workflow.Step {
		return workflow.Step{ID: id, ToolID: tool, Inputs: inputs, Outputs: slices.Clone(byID[tool].Outputs)}
	}
	return workflow.Workflow{ID: "w", UserID: "u", Name: "Base", Description: "fuzz base", Version: 4, Steps: []workflow.Step{
		step("fetch", "http_request", map[string]any{"url": "https://example.com/data.json"}),
		step("q", "json_query", map[string]any{"input": "{{fetch.json}}", "query": ".items"}),
		step("h", "hash", map[string]any{"text": "result: {{ q.result }}", "algorithm": "sha256"}),
	}}
}

// fuzzProposalSeeds are JSON change lists (testdata/fuzz has more).
var fuzzProposalSeeds = []string{
	`[]`,
	`[{"type":"add_step","step":{"id":"t","toolId":"text_template","inputs":{"template":"{{.x}}","values":{"x":"{{h.digest}}"}}}}]`,
	`[{"type":"add_step","step":{"id":"m","toolId":"math_evaluate","inputs":{"expression":"a+1","variables":{"a":"{{q.result}}"}}},"position":2}]`,
	`[{"type":"remove_step","stepId":"h"},{"type":"move_step","stepId":"q","position":0}]`,
	`[{"type":"update_step","stepId":"q","toolId":"regex_extract","inputs":{"text":"{{fetch.body}}","pattern":"\\d+"}}]`,
	`[{"type":"update_step","stepId":"h","inputs":{"text":"{{h.digest}}","algorithm":"md5"}}]`,
	`[{"type":"update_workflow","name":"  New name ","description":""}]`,
	`[{"type":"add_step","step":{"id":"fetch","toolId":"hash","inputs":{}}}]`,
	`[{"type":"add_step","step":{"id":"x","toolId":"datetime_now"}},{"type":"remove_step","stepId":"x"},{"type":"add_step","step":{"id":"x","toolId":"csv_parse","inputs":{"text":"a,b"}}}]`,
	`[{"type":"move_step","stepId":"h","position":-1}]`,
	`[{"type":"explode"},{},null]`,
	`[{"type":"update_workflow","inputSchema":{"type":"object","properties":{"q":{"type":"string"},"list":{"type":"array"}}}},{"type":"add_step","step":{"id":"e","toolId":"hash","inputs":{"text":"{{item}} {{input.q}}","algorithm":"md5"},"forEach":"{{input.list}}","concurrency":3,"if":"q.result != nil"}}]`,
	`[{"type":"update_step","stepId":"h","if":"fetch.status == 200","continueOnError":true}]`,
	`[{"type":"update_step","stepId":"q","forEach":"{{fetch.body}}"}]`,
	`{"type":"add_step"}`,
}

// FuzzApplyChanges applies arbitrary change lists to fuzzBase against the
// real built-in tool catalog. A change list is the input's JSON when it
// parses as one, otherwise a list generated from the input's bytes (so
// that most inputs are structurally valid proposals). Properties:
//   - ApplyChanges never panics, does not modify the workflow it is given,
//     and is deterministic; every problem names a field and says what is
//     wrong;
//   - when it reports no problem, the changes apply: the result has the
//     step ids, order, tools, inputs, name and description that replaying
//     the changes on a simple model gives; its step ids are unique and
//     match IdentPattern; there are at most MaxSteps steps, each naming a
//     catalog tool with that tool's outputs; every reference names an
//     earlier step and one of its outputs; inputs without references pass
//     the tool registry's own validation; and the result revalidates
//     unchanged with no changes (an apply after a rebase).
func FuzzApplyChanges(f *testing.F) {
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		f.Fatal(err)
	}
	var catalog []toolclient.ToolDetail
	byID := map[string]toolclient.ToolDetail{}
	for _, tl := range reg.List() {
		ti := toolclient.ToolDetail{ID: tl.ID, Name: tl.Name, Description: tl.Description,
			InputSchema: tl.InputSchema, OutputSchema: tl.OutputSchema, Outputs: tl.Outputs()}
		catalog = append(catalog, ti)
		byID[ti.ID] = ti
	}
	if _, probs := ApplyChanges(fuzzBase(byID), nil, catalog); len(probs) > 0 {
		f.Fatalf("the base workflow does not validate: %+v", probs)
	}
	for _, s := range fuzzProposalSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{3, 7, 2, 1, 9, 9, 9, 4, 0, 1, 2, 3, 5, 5, 5, 1})

	f.Fuzz(func(t *testing.T, data []byte) {
		var changes []workflow.Change
		if json.Unmarshal(data, &changes) != nil {
			changes = fuzzGenerateChanges(data, catalog)
		}
		base := fuzzBase(byID)
		before := fuzzJSONOf(t, base)
		got, probs := ApplyChanges(base, changes, catalog)
		if fuzzJSONOf(t, base) != before {
			t.Fatalf("ApplyChanges modified its workflow")
		}
		again, probs2 := ApplyChanges(fuzzBase(byID), changes, catalog)
		if !reflect.DeepEqual(probs, probs2) || (len(probs) == 0 && !reflect.DeepEqual(got, again)) {
			t.Fatalf("ApplyChanges is not deterministic: %+v vs %+v", probs, probs2)
		}
		if len(probs) > 0 {
			for _, p := range probs {
				if p.Field == "" || p.Message == "" || !(strings.HasPrefix(p.Field, "changes[") || strings.HasPrefix(p.Field, "steps")) {
					t.Fatalf("problem %+v does not name a field of the proposal", p)
				}
			}
			if e := proposalError("fuzz", CodeInvalidProposal, "invalid", probs); e.Message == "" || len(e.Details) != len(probs) {
				t.Fatalf("proposalError = %+v", e)
			}
			return
		}

		// The model: replay the (valid) changes on ids, tools and inputs.
		ids := []string{}
		tool := map[string]string{}
		inputs := map[string]map[string]any{}
		for _, s := range base.Steps {
			ids = append(ids, s.ID)
			tool[s.ID], inputs[s.ID] = s.ToolID, s.Inputs
		}
		name, desc := base.Name, base.Description
		type control struct {
			cond, forEach string
			conc          *int
			coe           bool
		}
		ctl := map[string]control{}
		for _, c := range changes {
			switch c.Type {
			case workflow.ChangeAddStep:
				pos := len(ids)
				if c.Position != nil {
					pos = *c.Position
				}
				ids = slices.Insert(ids, pos, c.Step.ID)
				tool[c.Step.ID], inputs[c.Step.ID] = c.Step.ToolID, c.Step.Inputs
				ctl[c.Step.ID] = control{c.Step.If, c.Step.ForEach, c.Step.Concurrency, c.Step.ContinueOnError}
			case workflow.ChangeUpdateStep:
				if c.ToolID != nil {
					tool[c.StepID] = *c.ToolID
				}
				if c.Inputs != nil {
					inputs[c.StepID] = *c.Inputs
				}
				k := ctl[c.StepID]
				if c.If != nil {
					k.cond = *c.If
				}
				if c.ForEach != nil {
					if k.forEach = *c.ForEach; k.forEach == "" {
						k.conc = nil
					}
				}
				if c.Concurrency != nil {
					k.conc = c.Concurrency
				}
				if c.ContinueOnError != nil {
					k.coe = *c.ContinueOnError
				}
				ctl[c.StepID] = k
			case workflow.ChangeRemoveStep:
				ids = slices.DeleteFunc(ids, func(id string) bool { return id == c.StepID })
			case workflow.ChangeMoveStep:
				ids = slices.DeleteFunc(ids, func(id string) bool { return id == c.StepID })
				ids = slices.Insert(ids, *c.Position, c.StepID)
			case workflow.ChangeUpdateWorkflow:
				if c.Name != nil {
					name = strings.TrimSpace(*c.Name)
				}
				if c.Description != nil {
					desc = *c.Description
				}
			default:
				t.Fatalf("change type %q accepted", c.Type)
			}
		}
		var gotIDs []string
		for _, s := range got.Steps {
			gotIDs = append(gotIDs, s.ID)
		}
		if !slices.Equal(gotIDs, ids) || got.Name != name || got.Description != desc {
			t.Fatalf("result %v %q %q, replaying the changes gives %v %q %q", gotIDs, got.Name, got.Description, ids, name, desc)
		}
		if got.ID != base.ID || got.UserID != base.UserID || got.Version != base.Version {
			t.Fatalf("ApplyChanges changed the workflow's identity: %+v", got)
		}
		if len(got.Steps) > workflow.MaxSteps {
			t.Fatalf("%d steps accepted, at most %d", len(got.Steps), workflow.MaxSteps)
		}
		seen := map[string]int{}
		for j, s := range got.Steps {
			if !workflow.ValidIdent(s.ID) {
				t.Fatalf("step id %q accepted", s.ID)
			}
			if _, dup := seen[s.ID]; dup {
				t.Fatalf("duplicate step id %q accepted", s.ID)
			}
			seen[s.ID] = j
			ti, ok := byID[s.ToolID]
			if !ok || s.ToolID != tool[s.ID] {
				t.Fatalf("step %s has tool %q, want %q of the catalog", s.ID, s.ToolID, tool[s.ID])
			}
			wantOutputs := ti.Outputs
			if s.ForEach != "" {
				wantOutputs = []string{workflow.ForEachOutput}
			}
			if !slices.Equal(s.Outputs, wantOutputs) {
				t.Fatalf("step %s has outputs %v, want %v", s.ID, s.Outputs, wantOutputs)
			}
			k := ctl[s.ID]
			if s.If != k.cond || s.ForEach != k.forEach || !reflect.DeepEqual(s.Concurrency, k.conc) || s.ContinueOnError != k.coe {
				t.Fatalf("step %s has control %q %q %v %v, the changes give %+v", s.ID, s.If, s.ForEach, s.Concurrency, s.ContinueOnError, k)
			}
			if s.If != "" {
				if _, err := condition.Compile(s.If); err != nil {
					t.Fatalf("step %s: if %q accepted, but it does not compile: %v", s.ID, s.If, err)
				}
			}
			if s.ForEach != "" {
				if r, ok := workflow.IsExactTemplate(s.ForEach); !ok || r.IsItem() {
					t.Fatalf("step %s: forEach %q accepted", s.ID, s.ForEach)
				}
				if c := s.Concurrency; c != nil && (*c < 1 || *c > workflow.MaxConcurrency) {
					t.Fatalf("step %s: concurrency %d accepted", s.ID, *c)
				}
			} else if s.Concurrency != nil {
				t.Fatalf("step %s: concurrency without forEach accepted", s.ID)
			}
			want := fuzzNormalized(t, inputs[s.ID])
			if want == nil {
				want = map[string]any{}
			}
			if !reflect.DeepEqual(fuzzNormalized(t, s.Inputs), want) {
				t.Fatalf("step %s has inputs %v, the changes give %v", s.ID, s.Inputs, want)
			}
			refs := workflow.Refs(s.Inputs)
			for _, r := range refs {
				switch {
				case r.IsItem():
					if s.ForEach == "" {
						t.Fatalf("step %s reads %s without forEach", s.ID, r)
					}
					continue
				case r.IsInput():
					if !strings.Contains(string(got.InputSchema), `"`+r.Output+`"`) {
						t.Fatalf("step %s reads %s, which the inputSchema %s does not declare", s.ID, r, got.InputSchema)
					}
					continue
				}
				k, ok := seen[r.StepID]
				if !ok || k >= j {
					t.Fatalf("step %s refers to %s, which is not an earlier step", s.ID, r)
				}
				if !slices.Contains(got.Steps[k].Outputs, r.Output) {
					t.Fatalf("step %s refers to %s, not an output of %s", s.ID, r, got.Steps[k].ID)
				}
			}
			if len(refs) == 0 {
				if err := reg.Validate(s.ToolID, s.Inputs); err != nil {
					t.Fatalf("step %s: inputs %v accepted, but the registry rejects them: %v", s.ID, s.Inputs, err)
				}
			}
		}
		re, probs := ApplyChanges(got, nil, catalog)
		if len(probs) > 0 || !reflect.DeepEqual(fuzzNormalizedWorkflow(t, re), fuzzNormalizedWorkflow(t, got)) {
			t.Fatalf("the result does not revalidate unchanged: %+v", probs)
		}
	})
}

// generateChanges turns bytes into a change list over a small vocabulary
// of step ids, tools, inputs, positions and names, so that the fuzzer
// explores sequences of well-formed changes.
func fuzzGenerateChanges(data []byte, catalog []toolclient.ToolDetail) []workflow.Change {
	ids := []string{"fetch", "q", "h", "a", "b", "c", "x_1", "", "1bad", "bad-id", "Z" + strings.Repeat("z", 63), "Z" + strings.Repeat("z", 64)}
	toolIDs := []string{"nope", ""}
	for _, ti := range catalog {
		toolIDs = append(toolIDs, ti.ID)
	}
	inputSets := []func() map[string]any{
		func() map[string]any { return nil },
		func() map[string]any { return map[string]any{} },
		func() map[string]any { return map[string]any{"text": "{{fetch.body}}", "algorithm": "md5"} },
		func() map[string]any { return map[string]any{"text": "plain", "algorithm": "sha256"} },
		func() map[string]any {
			return map[string]any{"text": "{{a.digest}} and {{b.text}}", "algorithm": "{{q.result}}"}
		},
		func() map[string]any { return map[string]any{"input": map[string]any{"a": []any{1.0}}, "query": ".a"} },
		func() map[string]any { return map[string]any{"input": "{{h.digest}}", "query": "{{fetch.body}}"} },
		func() map[string]any {
			return map[string]any{"template": "{{.x}} {{a.b.c}}", "values": map[string]any{"x": "{{c.value}}"}}
		},
		func() map[string]any {
			return map[string]any{"expression": "1 + x", "variables": map[string]any{"x": 2.0}}
		},
		func() map[string]any { return map[string]any{"expression": "x", "variables": "{{q.result}}"} },
		func() map[string]any { return map[string]any{"url": "https://example.com", "method": "{{a.digest}}"} },
		func() map[string]any { return map[string]any{"text": 12.0, "algorithm": "md5", "extra": true} },
		func() map[string]any { return map[string]any{"text": "a,b\n1,2"} },
		func() map[string]any { return map[string]any{"prompt": "Summarize {{fetch.body}}"} },
		func() map[string]any { return map[string]any{"text": "{{item}} / {{item.a}}", "algorithm": "md5"} },
		func() map[string]any { return map[string]any{"text": "{{input.q}}", "algorithm": "sha1"} },
		func() map[string]any { return map[string]any{"input": "{{input.list}}", "query": "{{item.a}}"} },
	}
	conds := []string{"", "fetch.status == 200", "input.q != nil", "q.result > 1", "ghost.x", "fetch.status +", "len(q.result) > 0", "all(x, true)", "h.digest"}
	forEaches := []string{"", "{{fetch.json}}", "{{input.list}}", "{{fetch.status}}", "{{q.result}}", "{{item}}", "x {{fetch.json}}", "{{input.q}}", "{{h.digest}}"}
	concs := []*int{nil, vptr(0), vptr(1), vptr(4), vptr(16), vptr(17)}
	schemas := []json.RawMessage{nil, json.RawMessage(`null`), json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"},"list":{"type":"array"}}}`),
		json.RawMessage(`{"type":"object","properties":{"q":{"type":"number"}}}`), json.RawMessage(`{"type":"array"}`), json.RawMessage(`{"type":"object","properties":{"a":{"type":"nope"}}}`)}
	names := []string{"New", "  padded  ", " ", "", strings.Repeat("n", workflow.MaxNameLen), strings.Repeat("é", workflow.MaxNameLen+1)}
	i := 0
	next := func() int {
		if i >= len(data) {
			return 0
		}
		i++
		return int(data[i-1])
	}
	pick := func(n int) int { return next() % n }
	position := func() *int {
		v := next()
		if v%4 == 0 {
			return nil
		}
		p := v%10 - 1
		return &p
	}
	var changes []workflow.Change
	for i < len(data) && len(changes) < 64 {
		switch op := next(); op % 7 {
		case 0, 1:
			sp := &workflow.StepSpec{ID: ids[pick(len(ids))], ToolID: toolIDs[pick(len(toolIDs))], Inputs: inputSets[pick(len(inputSets))]()}
			if v := next(); v%3 == 0 {
				sp.If, sp.ForEach, sp.Concurrency, sp.ContinueOnError = conds[v%len(conds)], forEaches[next()%len(forEaches)], concs[next()%len(concs)], v%2 == 0
			}
			changes = append(changes, workflow.Change{Type: workflow.ChangeAddStep, Step: sp, Position: position()})
		case 2:
			c := workflow.Change{Type: workflow.ChangeUpdateStep, StepID: ids[pick(len(ids))]}
			if v := next(); v%3 != 0 {
				c.ToolID = &toolIDs[v%len(toolIDs)]
			}
			if v := next(); v%3 != 0 {
				in := inputSets[v%len(inputSets)]()
				c.Inputs = &in
			}
			if v := next(); v%4 == 0 {
				c.If, c.ForEach, c.Concurrency = &conds[v%len(conds)], &forEaches[next()%len(forEaches)], concs[next()%len(concs)]
			}
			changes = append(changes, c)
		case 3:
			changes = append(changes, workflow.Change{Type: workflow.ChangeRemoveStep, StepID: ids[pick(len(ids))]})
		case 4:
			changes = append(changes, workflow.Change{Type: workflow.ChangeMoveStep, StepID: ids[pick(len(ids))], Position: position()})
		case 5:
			c := workflow.Change{Type: workflow.ChangeUpdateWorkflow}
			if v := next(); v%3 != 0 {
				c.Name = &names[v%len(names)]
			}
			if v := next(); v%3 != 0 {
				d := strings.Repeat("d", v*5)
				c.Description = &d
			}
			if v := next(); v%3 == 0 {
				c.InputSchema = schemas[v%len(schemas)]
			}
			changes = append(changes, c)
		default:
			changes = append(changes, workflow.Change{Type: []string{"explode", "", "ADD_STEP"}[pick(3)]})
		}
	}
	return changes
}

func fuzzJSONOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// normalized is m as JSON gives it back (numbers float64, and so on).
func fuzzNormalized(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	if m == nil {
		return nil
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(fuzzJSONOf(t, m)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func fuzzNormalizedWorkflow(t *testing.T, w workflow.Workflow) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(fuzzJSONOf(t, w)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
