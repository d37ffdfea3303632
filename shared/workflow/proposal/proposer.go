package proposal

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow"
)

// The built-in model's workflow rules (docs/decisions.md, Models).
// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package.
var (
	addStepRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("(?i)\\badd\\s+(?:a\\s+|another\\s+|one\\s+more\\s+)?step\\s+(?:using|with|that\\s+uses|running|calling)\\s+(?:the\\s+)?[`\"']?([a-z][a-z0-9_]{0,63})")
	})
	removeStepRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("(?i)\\b(?:remove|delete)\\s+(?:the\\s+)?step\\s+[`\"']?([A-Za-z][A-Za-z0-9_]{0,63})")
	})
	renameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?is)\brename\s+(?:the\s+)?workflow\s+to\s+(.+)$`) })
)

// builtinPropose applies the rules to text: "add a step using <tool> with
// {json}" (inputs as given), "add a step using <tool>" (inputs from the
// schema's defaults, examples or placeholders), "remove step <id>",
// "rename workflow to <name>". It returns the reply, the changes and
// whether a proposal was made.
func builtinPropose(w workflow.Workflow, history []workflow.Message, text string, tools []toolclient.ToolDetail) (string, []workflow.Change, bool) {
	if m := addStepRE().FindStringSubmatchIndex(text); m != nil {
		toolID := strings.ToLower(text[m[2]:m[3]])
		rest := text[m[1]:]
		var inputs map[string]any
		given := false
		if i := strings.IndexByte(rest, '{'); i >= 0 {
			if err := json.NewDecoder(strings.NewReader(rest[i:])).Decode(&inputs); err != nil {
				return "I could not read the inputs after the tool name as a JSON object: " + err.Error(), nil, false
			}
			given = true
		} else if t := findTool(tools, toolID); t != nil {
			inputs = placeholderInputs(t.InputSchema)
		}
		if inputs == nil {
			inputs = map[string]any{}
		}
		id := freshStepID(w, history)
		b, _ := json.Marshal(inputs)
		how := "with the inputs you gave"
		if !given {
			how = "with placeholder inputs from the tool's schema (edit them as you need)"
		}
		reply := fmt.Sprintf("I propose adding step %s, which runs %s %s: %s. Apply the proposal to change the workflow, or reject it.", id, toolID, how, b)
		return reply, []workflow.Change{{Type: workflow.ChangeAddStep, Step: &workflow.StepSpec{ID: id, ToolID: toolID, Inputs: inputs}}}, true
	}
	if m := removeStepRE().FindStringSubmatch(text); m != nil {
		return fmt.Sprintf("I propose removing step %s. Apply the proposal to change the workflow, or reject it.", m[1]),
			[]workflow.Change{{Type: workflow.ChangeRemoveStep, StepID: m[1]}}, true
	}
	if m := renameRE().FindStringSubmatch(text); m != nil {
		name := strings.TrimSpace(m[1])
		name = strings.TrimRight(name, ".!")
		name = strings.Trim(strings.TrimSpace(name), "\"'`“”")
		return fmt.Sprintf("I propose renaming the workflow to %q. Apply the proposal to change the workflow, or reject it.", name),
			[]workflow.Change{{Type: workflow.ChangeUpdateWorkflow, Name: &name}}, true
	}
	return builtinHelp(w, tools), nil, false
}

func builtinHelp(w workflow.Workflow, tools []toolclient.ToolDetail) string {
	var b strings.Builder
	b.WriteString("I am the built-in offline assistant. I can propose changes to this workflow when you ask in one of these forms: ")
	b.WriteString(`"add a step using <tool> with {JSON inputs}", "add a step using <tool>" (placeholder inputs), "remove step <step id>", "rename workflow to <name>".`)
	b.WriteString(` Inputs can use an earlier step's output as {{step_id.output}}.`)
	ids := make([]string, 0, len(tools))
	for _, t := range tools {
		ids = append(ids, t.ID)
	}
	if len(ids) > 0 {
		b.WriteString(" Tools: " + strings.Join(ids, ", ") + ".")
	}
	if len(w.Steps) == 0 {
		b.WriteString(" The workflow has no steps yet.")
	} else {
		var steps []string
		for _, s := range w.Steps {
			steps = append(steps, s.ID+" ("+s.ToolID+")")
		}
		b.WriteString(" Steps: " + strings.Join(steps, ", ") + ".")
	}
	return b.String()
}

func findTool(tools []toolclient.ToolDetail, id string) *toolclient.ToolDetail {
	for i := range tools {
		if tools[i].ID == id {
			return &tools[i]
		}
	}
	return nil
}

// freshStepID returns the first stepN not used by the workflow nor by a
// pending proposal of the conversation, so that pending proposals do not
// collide when applied one after the other.
func freshStepID(w workflow.Workflow, history []workflow.Message) string {
	used := map[string]bool{}
	for _, s := range w.Steps {
		used[s.ID] = true
	}
	for _, m := range history {
		if m.Proposal == nil || m.Proposal.Status != workflow.ProposalPending {
			continue
		}
		for _, c := range m.Proposal.Changes {
			if c.Step != nil {
				used[c.Step.ID] = true
			}
		}
	}
	for n := len(w.Steps) + 1; ; n++ {
		if id := fmt.Sprintf("step%d", n); !used[id] {
			return id
		}
	}
}

// placeholderInputs returns a value for every required input of schema:
// its default, else its first example, else its first enum value, else an
// obvious placeholder of its type.
func placeholderInputs(schema json.RawMessage) map[string]any {
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	out := map[string]any{}
	if json.Unmarshal(schema, &s) != nil {
		return out
	}
	for _, name := range s.Required {
		out[name] = placeholder(name, s.Properties[name])
	}
	return out
}

func placeholder(name string, p map[string]any) any {
	if v, ok := p["default"]; ok {
		return v
	}
	if ex, ok := p["examples"].([]any); ok && len(ex) > 0 {
		return ex[0]
	}
	if en, ok := p["enum"].([]any); ok && len(en) > 0 {
		return en[0]
	}
	typ, _ := p["type"].(string)
	if ts, ok := p["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	switch typ {
	case "string":
		if f, _ := p["format"].(string); f == "uri" || f == "url" || strings.Contains(strings.ToLower(name), "url") {
			return "https://example.com"
		}
		return "<" + name + ">"
	case "integer", "number":
		if m, ok := p["minimum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	}
	return nil
}
