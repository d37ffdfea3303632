package proposal

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow"
)

// ProposeToolName is the native tool offered to real models: calling it
// proposes changes to the workflow.
const ProposeToolName = "propose_changes"

// maxHistory is how many earlier messages the model sees.
const maxHistory = 50

// proposeSchema is the parameters schema of propose_changes: the change
// types of docs/openapi.yaml's WorkflowChange.
var proposeSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "changes": {
      "type": "array",
      "description": "The changes, applied in order.",
      "items": {
        "type": "object",
        "properties": {
          "type": {"type": "string", "enum": ["add_step", "update_step", "remove_step", "move_step", "update_workflow"]},
          "step": {
            "type": "object",
            "description": "add_step: the new step. inputs must match the tool's input schema; a string value {{step_id.output}} uses an earlier step's output, {{input.name}} a property of the run's input, {{item}} (or {{item.field}}) the current element in a forEach step.",
            "properties": {
              "id": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_]{0,63}$", "description": "Unique; not input or item."},
              "toolId": {"type": "string"},
              "inputs": {"type": "object"},
              "if": {"type": "string", "description": "Optional condition (expr syntax) over input and earlier steps, e.g. step1.value > 3; false skips the step."},
              "forEach": {"type": "string", "description": "Optional: one template naming an array ({{step1.rows}} or {{input.items}}); the tool runs once per element and the step's output is {results: [...]}."},
              "concurrency": {"type": "integer", "minimum": 1, "maximum": 16, "description": "forEach steps: calls at once (default 4)."},
              "continueOnError": {"type": "boolean", "description": "A failure does not fail the run."}
            },
            "required": ["id", "toolId", "inputs"]
          },
          "position": {"type": "integer", "minimum": 0, "description": "add_step: index to insert at (default: append); move_step: the new index."},
          "stepId": {"type": "string", "description": "update_step, remove_step, move_step: the step's id."},
          "toolId": {"type": "string", "description": "update_step: the new tool."},
          "inputs": {"type": "object", "description": "update_step: the new inputs (replace the old ones)."},
          "if": {"type": "string", "description": "update_step: the new condition (\"\" removes it)."},
          "forEach": {"type": "string", "description": "update_step: the new forEach template (\"\" removes it)."},
          "concurrency": {"type": "integer", "minimum": 1, "maximum": 16, "description": "update_step: the new concurrency of a forEach step."},
          "continueOnError": {"type": "boolean", "description": "update_step: whether a failure lets the run go on."},
          "name": {"type": "string", "description": "update_workflow: new name (1-255 characters)."},
          "description": {"type": "string", "description": "update_workflow: new description (at most 1000 characters)."},
          "inputSchema": {"type": ["object", "null"], "description": "update_workflow: the JSON Schema (type object) of the run's input; null removes it."}
        },
        "required": ["type"]
      }
    }
  },
  "required": ["changes"]
}`)

// assist produces the assistant's reply to user: its text and, when
// proposed, the changes it proposes (not yet validated). The built-in
// model follows deterministic rules (docs/decisions.md, Models); other models
// get the workflow, the catalog and the conversation, and propose through
// a native call of propose_changes, under the owner's budget (the call
// reserves before and settles after, usage.Meter.Generate).
func (s *Service) assist(ctx context.Context, modelID string, w workflow.Workflow, history []workflow.Message, user workflow.Message, tools []toolclient.ToolDetail) (string, []workflow.Change, bool, error) {
	if modelID == model.BuiltinID {
		text, changes, ok := builtinPropose(w, history, user.Content, tools)
		return text, changes, ok, nil
	}
	req := model.Request{
		ModelID: modelID,
		System:  systemPrompt(w, tools),
		Tools: []model.ToolSpec{{Name: ProposeToolName, InputSchema: proposeSchema,
			Description: "Propose changes to the user's workflow. The user reviews the proposal and applies or rejects it."}},
	}
	if len(history) > maxHistory {
		history = history[len(history)-maxHistory:]
	}
	for _, m := range append(history, user) {
		content := m.Content
		if m.Proposal != nil {
			b, _ := json.Marshal(m.Proposal.Changes)
			content += fmt.Sprintf("\n[proposal %s, %s: %s]", m.Proposal.ID, m.Proposal.Status, b)
		}
		req.Messages = append(req.Messages, model.Message{Role: m.Role, Content: content})
	}
	var b strings.Builder
	res, err := s.usage.Generate(ctx, s.models, w.UserID, req, nil, func(c model.Chunk) error { b.WriteString(c.Delta); return nil })
	if err != nil {
		return "", nil, false, err
	}
	text := b.String()
	for _, call := range res.ToolCalls {
		if call.Name != ProposeToolName {
			continue
		}
		var args struct {
			Changes []workflow.Change `json:"changes"`
		}
		if err := json.Unmarshal(call.Args, &args); err != nil {
			return strings.TrimSpace(text + "\n\nI tried to propose changes, but the proposal was malformed: " + err.Error()), nil, false, nil
		}
		for i := range args.Changes {
			args.Changes[i] = normalizeChange(args.Changes[i])
		}
		return text, args.Changes, true, nil
	}
	return text, nil, false, nil
}

// normalizeChange keeps only the fields of c's type, as a model may send
// others, and makes absent inputs an empty object.
func normalizeChange(c workflow.Change) workflow.Change {
	n := workflow.Change{Type: c.Type}
	switch c.Type {
	case workflow.ChangeAddStep:
		n.Step, n.Position = c.Step, c.Position
		if n.Step != nil && n.Step.Inputs == nil {
			n.Step.Inputs = map[string]any{}
		}
	case workflow.ChangeUpdateStep:
		n.StepID, n.ToolID, n.Inputs = c.StepID, c.ToolID, c.Inputs
		n.If, n.ForEach, n.Concurrency, n.ContinueOnError = c.If, c.ForEach, c.Concurrency, c.ContinueOnError
	case workflow.ChangeRemoveStep:
		n.StepID = c.StepID
	case workflow.ChangeMoveStep:
		n.StepID, n.Position = c.StepID, c.Position
	case workflow.ChangeUpdateWorkflow:
		n.Name, n.Description, n.InputSchema = c.Name, c.Description, c.InputSchema
	default:
		return c // validation reports the unknown type
	}
	return n
}

func systemPrompt(w workflow.Workflow, tools []toolclient.ToolDetail) string {
	wb, _ := json.MarshalIndent(struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema,omitempty"`
		Steps       []workflow.Step `json:"steps"`
	}{w.Name, w.Description, w.InputSchema, w.Steps}, "", "  ")
	type toolDoc struct {
		ID          string          `json:"id"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Outputs     []string        `json:"outputs"`
	}
	docs := make([]toolDoc, 0, len(tools))
	for _, t := range tools {
		docs = append(docs, toolDoc{t.ID, t.Description, t.InputSchema, t.Outputs})
	}
	tb, _ := json.Marshal(docs)
	return "You help the user edit a workflow: an ordered list of steps, each running one tool with inputs. " +
		"A string input that is exactly {{step_id.output}} takes the value of an earlier step's output (any JSON type); " +
		"inside a longer string it is interpolated as text. {{input.name}} reads a property of the run's input (declared by the workflow's inputSchema). " +
		"A step may have if (a condition in expr syntax over input and earlier steps, e.g. step1.value > 3), " +
		"forEach (one template naming an array; the tool runs once per element, read as {{item}} or {{item.field}}, and the step's only output is results), " +
		"concurrency (1-16) and continueOnError. The tool ask_human pauses the run until a person answers (outputs approved, values). " +
		"Step ids match ^[A-Za-z][A-Za-z0-9_]{0,63}$, are unique and are not input or item. " +
		"When the user asks for a change, call " + ProposeToolName + " once with every change, and explain it briefly; " +
		"the user then applies or rejects the proposal. Otherwise answer without calling it.\n\n" +
		"The workflow:\n" + string(wb) + "\n\nThe tools (id, description, input schema, outputs):\n" + string(tb)
}
