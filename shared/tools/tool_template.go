package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// maxTemplateSteps caps the loop iterations plus template invocations of
// one text_template execution.
const maxTemplateSteps = 1_000_000

// tickFunc is the name of the function instrumentTemplate inserts into
// every loop body and template body.
const tickFunc = "__wfc_tick"

// errTemplateTooLong is returned when a rendered template exceeds
// maxTextOutput.
var errTemplateTooLong = fmt.Errorf("rendered text exceeds %d bytes", maxTextOutput)

// errTooManySteps is returned when a template runs more than
// maxTemplateSteps loop iterations and template calls.
var errTooManySteps = fmt.Errorf("the template runs more than %d loop iterations and template calls", maxTemplateSteps)

func textTemplateTool() *Tool {
	return &Tool{
		ID:       "text_template",
		Name:     "Render text template",
		Category: CategoryText,
		Description: "Renders a Go text/template with the given values, e.g. to build a message, an email body or a prompt from data. " +
			"Fields: template (Go template syntax: {{.name}} inserts values.name, {{range .items}}...{{end}} loops, {{if .x}}...{{else}}...{{end}} branches, " +
			"{{index .list 0}}, {{len .list}}, {{printf \"%.2f\" .price}}; extra functions: upper, lower, trim, join (join .list \", \"), json (encode a value as JSON)), " +
			"values (an object whose keys the template refers to). Referring to a key that is missing from values is an error. " +
			"The output is at most 1 MiB. " +
			`Example: {"template": "Hello {{.name}}, you have {{len .tasks}} tasks.", "values": {"name": "Ada", "tasks": ["a", "b"]}} returns {"text": "Hello Ada, you have 2 tasks."}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "template": {"type": "string", "maxLength": 100000, "description": "A Go text/template. Values are reached from the dot: {{.name}}, {{.user.email}}, {{range .items}}{{.title}}{{end}}.", "examples": ["Hello {{.name}}!"]},
    "values": {"type": "object", "default": {}, "description": "The data the template renders: an object whose keys are referenced as {{.key}}. Example: {\"name\": \"Ada\"}."}
  },
  "required": ["template"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The rendered text."}
  },
  "required": ["text"],
  "additionalProperties": false
}`),
		Annotations: computeOnly(),
		Isolated:    true,
		Timeout:     10 * time.Second,
		Run:         runTextTemplate,
	}
}

// runTextTemplate renders input "template" with input "values". It fails
// with INVALID_PARAMS when the template does not parse, and with an
// execution failure when rendering fails (a missing key, a bad function
// argument), the text exceeds maxTextOutput, or the template runs more than
// maxTemplateSteps loop iterations and template calls. A context deadline
// stops rendering at the next loop iteration or template call.
func runTextTemplate(ctx context.Context, in map[string]any) (map[string]any, error) {
	src, err := stringArg(in, "template", true, "")
	if err != nil {
		return nil, err
	}
	values, err := objectArg(in, "values")
	if err != nil {
		return nil, err
	}
	if values == nil {
		values = map[string]any{}
	}

	steps := 0
	tick := func() (string, error) {
		steps++
		if steps > maxTemplateSteps {
			return "", errTooManySteps
		}
		return "", ctx.Err()
	}
	t, err := template.New("template").
		Option("missingkey=error").
		Funcs(template.FuncMap{
			tickFunc: tick,
			"upper":  strings.ToUpper,
			"lower":  strings.ToLower,
			"trim":   strings.TrimSpace,
			"join":   joinValues,
			"json":   jsonString,
		}).
		Parse(src)
	if err != nil {
		return nil, invalidField("template", "%s", templateMessage(err))
	}
	for _, tt := range t.Templates() {
		if tt.Tree != nil && tt.Tree.Root != nil {
			instrumentTemplate(tt.Tree.Root)
		}
	}

	w := &capWriter{max: maxTextOutput}
	if err := t.Execute(w, values); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		// Our own errors, whole: text/template would name the function
		// that counts the steps, an internal name, in its message.
		for _, own := range []error{errTemplateTooLong, errTooManySteps} {
			if errors.Is(err, own) {
				return nil, own
			}
		}
		return nil, errors.New("rendering failed: " + templateMessage(err))
	}
	return map[string]any{"text": w.String()}, nil
}

// instrumentTemplate inserts a call of tickFunc at the start of list and of
// every range body within it, so that every loop iteration and every
// template invocation is counted and checks the context: text/template
// itself cannot be interrupted.
func instrumentTemplate(list *parse.ListNode) {
	list.Nodes = append([]parse.Node{tickNode()}, list.Nodes...)
	instrumentLoops(list)
}

func instrumentLoops(list *parse.ListNode) {
	if list == nil {
		return
	}
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.RangeNode:
			if n.List != nil {
				n.List.Nodes = append([]parse.Node{tickNode()}, n.List.Nodes...)
			}
			instrumentLoops(n.List)
			instrumentLoops(n.ElseList)
		case *parse.IfNode:
			instrumentLoops(n.List)
			instrumentLoops(n.ElseList)
		case *parse.WithNode:
			instrumentLoops(n.List)
			instrumentLoops(n.ElseList)
		case *parse.ListNode:
			instrumentLoops(n)
		}
	}
}

// tickNode returns the action {{__wfc_tick}}.
func tickNode() *parse.ActionNode {
	return &parse.ActionNode{
		NodeType: parse.NodeAction,
		Pipe: &parse.PipeNode{
			NodeType: parse.NodePipe,
			Cmds: []*parse.CommandNode{{
				NodeType: parse.NodeCommand,
				Args:     []parse.Node{parse.NewIdentifier(tickFunc)},
			}},
		},
	}
}

// capWriter collects output up to max bytes and fails beyond.
type capWriter struct {
	strings.Builder
	max int
}

// Write implements io.Writer; it fails with errTemplateTooLong past max.
func (w *capWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > w.max {
		return 0, errTemplateTooLong
	}
	return w.Builder.Write(p)
}

// joinValues joins the elements of a list with sep; elements that are not
// strings are formatted as fmt's %v does.
func joinValues(list []any, sep string) string {
	parts := make([]string, len(list))
	for i, v := range list {
		if s, ok := v.(string); ok {
			parts[i] = s
		} else {
			parts[i] = fmt.Sprint(v)
		}
	}
	return strings.Join(parts, sep)
}

// jsonString encodes v as compact JSON.
func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
