// Package inputschema is the JSON Schema side of workflows: it checks a
// workflow's inputSchema (and ask_human's) when a definition is written,
// and validates a run's input against it when a run starts (ValidateInput,
// which the run starters call). It uses github.com/google/jsonschema-go
// (draft 2020-12, no external references), apart from package workflow so
// that what links the workflow types links no JSON Schema code.
package inputschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/schema"
)

// Bounds and names of input schemas (docs/decisions.md, Workflow
// definitions).
const (
	// MaxBytes bounds an input schema, measured compact.
	MaxBytes = 64 << 10
	// FormatAttachment is the format of a property that takes the id of
	// one of the user's attachments ({"type": "string", "format":
	// "attachment"}); the run engine resolves it.
	FormatAttachment = "attachment"
	// CodeInvalidInput is the code of a run input that does not match.
	CodeInvalidInput = "INVALID_INPUT"
)

// Schema is a checked input schema.
type Schema struct {
	raw      json.RawMessage
	root     *jsonschema.Schema
	resolved *jsonschema.Resolved
	// nesting bounds the inputs validated, so that the validator's
	// recursion stays far from the end of the stack.
	nesting schema.Nesting
}

// JSON returns the schema, compact.
func (s *Schema) JSON() json.RawMessage { return s.raw }

// Properties returns the top-level properties with their JSON types (the
// schema's "type", one or several; none when it does not say).
func (s *Schema) Properties() map[string][]string {
	out := make(map[string][]string, len(s.root.Properties))
	for name, p := range s.root.Properties {
		out[name] = typesOf(p)
	}
	return out
}

// Attachments returns the names of the top-level properties with format
// attachment, sorted.
func (s *Schema) Attachments() []string {
	var out []string
	for name, p := range s.root.Properties {
		if p != nil && p.Format == FormatAttachment {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func typesOf(p *jsonschema.Schema) []string {
	switch {
	case p == nil:
		return nil
	case p.Type != "":
		return []string{p.Type}
	default:
		return slices.Clone(p.Types)
	}
}

var jsonTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// Check checks raw as an object schema: a JSON object of at most MaxBytes
// (compact) with "type": "object" at the top, a valid JSON Schema (draft
// 2020-12 or draft-07) whose keywords have valid values and whose types
// are JSON types, with no reference outside itself, defaults valid
// against their schemas, and format attachment only on string
// properties. The error's text says what is wrong, for a field error.
func Check(raw json.RawMessage) (*Schema, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, errors.New("is not valid JSON")
	}
	compact := buf.Bytes()
	if len(compact) == 0 || compact[0] != '{' {
		return nil, errors.New(`must be a JSON Schema object with "type": "object"`)
	}
	if len(compact) > MaxBytes {
		return nil, fmt.Errorf("must be at most %d bytes of JSON (it is %d)", MaxBytes, len(compact))
	}
	var root jsonschema.Schema
	if err := json.Unmarshal(compact, &root); err != nil {
		return nil, fmt.Errorf("is not a valid JSON Schema: %s", cleanUnmarshal(err))
	}
	if root.Type != "object" {
		return nil, errors.New(`must have "type": "object" at the top`)
	}
	var problem error
	walk(&root, func(s *jsonschema.Schema) {
		for _, t := range typesOf(s) {
			if problem == nil && !slices.Contains(jsonTypes, t) {
				problem = fmt.Errorf("type %q is not a JSON type (one of %s)", t, strings.Join(jsonTypes, ", "))
			}
		}
	})
	if problem != nil {
		return nil, problem
	}
	for _, name := range slices.Sorted(maps.Keys(root.Properties)) {
		p := root.Properties[name]
		if p != nil && p.Format == FormatAttachment && !slices.Equal(typesOf(p), []string{"string"}) {
			return nil, fmt.Errorf(`property %q: format attachment needs "type": "string"`, name)
		}
	}
	opts := &jsonschema.ResolveOptions{
		Loader: func(uri *url.URL) (*jsonschema.Schema, error) {
			return nil, fmt.Errorf("external schema reference %q is not allowed", uri.String())
		},
	}
	if _, err := root.Resolve(opts); err != nil {
		return nil, fmt.Errorf("is not a valid JSON Schema: %s", located(err.Error()))
	}
	// Validating anything, the defaults first, against a schema with a
	// reference cycle would overflow the stack and kill the process, and
	// against one that applies too many schemas in place would take
	// exponential time.
	nesting, err := schema.CheckRefs(&root)
	if err != nil {
		return nil, fmt.Errorf("is not a valid JSON Schema: %s", err)
	}
	walk(&root, func(s *jsonschema.Schema) {
		var d any
		if problem == nil && s.Default != nil && json.Unmarshal(s.Default, &d) == nil {
			if err := nesting.CheckDepth(d); err != nil {
				problem = fmt.Errorf("has a default whose %s", err)
			}
		}
	})
	if problem != nil {
		return nil, problem
	}
	if err := nesting.CheckDefaults(); err != nil {
		return nil, fmt.Errorf("is too costly to validate: its %s", err)
	}
	opts.ValidateDefaults = true
	resolved, err := root.Resolve(opts)
	if err != nil {
		return nil, fmt.Errorf("is not a valid JSON Schema: %s", located(err.Error()))
	}
	return &Schema{raw: slices.Clone(compact), root: &root, resolved: resolved, nesting: nesting}, nil
}

// walk calls f on s and every schema under it.
func walk(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	if s == nil {
		return
	}
	f(s)
	for _, m := range []map[string]*jsonschema.Schema{s.Defs, s.Definitions, s.DependencySchemas, s.Properties, s.PatternProperties, s.DependentSchemas} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			walk(m[k], f)
		}
	}
	for _, l := range [][]*jsonschema.Schema{s.PrefixItems, s.ItemsArray, s.AllOf, s.AnyOf, s.OneOf} {
		for _, c := range l {
			walk(c, f)
		}
	}
	for _, c := range []*jsonschema.Schema{s.Items, s.AdditionalItems, s.Contains, s.UnevaluatedItems, s.AdditionalProperties,
		s.PropertyNames, s.UnevaluatedProperties, s.Not, s.If, s.Then, s.Else, s.ContentSchema} {
		walk(c, f)
	}
}

// ValidateInput validates a run's input against a workflow's input schema
// and returns the input to run with: plain JSON values, with the schema's
// defaults for the top-level properties the input leaves out. Without a
// schema any object is taken as it is (a webhook's payload, say): no step
// can read it, since a template may name only a declared input. Errors:
// Invalid INVALID_INPUT with details naming each field ("input.<name>")
// and what is wrong with it; Invalid INVALID_INPUT_SCHEMA when the stored schema itself does not
// check (it was checked when written, so only after a change of rules).
func ValidateInput(schema json.RawMessage, input map[string]any) (map[string]any, error) {
	const op = "inputschema.ValidateInput"
	if len(bytes.TrimSpace(schema)) == 0 || string(bytes.TrimSpace(schema)) == "null" {
		if input == nil {
			input = map[string]any{}
		}
		return input, nil
	}
	s, err := Check(schema)
	if err != nil {
		return nil, errs.E(op, errs.Invalid, "INVALID_INPUT_SCHEMA", "the workflow's inputSchema "+err.Error())
	}
	return s.Validate(input)
}

// Validate validates input against s (see ValidateInput).
func (s *Schema) Validate(input map[string]any) (map[string]any, error) {
	return s.ValidateField("input", input)
}

// ValidateField validates values, the object at field of a request,
// against s as Validate does, naming the problems "<field>.<name>" (for
// ask_human's answer: ValidateField("values", v) against the step's
// inputSchema). Errors: Invalid INVALID_INPUT with details.
func (s *Schema) ValidateField(field string, values map[string]any) (map[string]any, error) {
	const op = "inputschema.Validate"
	in, err := plain(values)
	if err != nil {
		return nil, invalidInput(op, field, []errs.FieldError{{Field: field, Message: "is not JSON: " + err.Error()}})
	}
	for name, p := range s.root.Properties {
		if _, given := in[name]; given || p == nil || p.Default == nil {
			continue
		}
		var d any
		if json.Unmarshal(p.Default, &d) == nil {
			in[name] = d
		}
	}
	if err := s.nesting.Check(in); err != nil {
		return nil, invalidInput(op, field, []errs.FieldError{{Field: field, Message: err.Error()}})
	}
	err = s.resolved.Validate(in)
	if err == nil {
		return in, nil
	}
	return nil, invalidInput(op, field, s.details(field, in, err))
}

// details explains a failed validation field by field: each missing
// required property, each property the schema does not allow, and each
// property whose value fails its own schema; what fails only as a whole
// is one detail for "input".
func (s *Schema) details(field string, in map[string]any, whole error) []errs.FieldError {
	var out []errs.FieldError
	for _, name := range s.root.Required {
		if _, ok := in[name]; !ok {
			out = append(out, errs.FieldError{Field: field + "." + name, Message: "is required"})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(in)) {
		one := &jsonschema.Schema{Schema: s.root.Schema, ID: s.root.ID, Type: "object", Defs: s.root.Defs, Definitions: s.root.Definitions}
		if p, declared := s.root.Properties[name]; declared {
			if p == nil {
				continue
			}
			one.Properties = map[string]*jsonschema.Schema{name: p}
		} else {
			// Undeclared: what the schema says of other properties.
			one.PatternProperties, one.AdditionalProperties = s.root.PatternProperties, s.root.AdditionalProperties
		}
		r, err := one.Resolve(nil)
		if err != nil {
			continue // the property's schema refers outside itself: the whole error stands
		}
		if err := r.Validate(map[string]any{name: in[name]}); err != nil {
			msg := clean(err.Error())
			if strings.Contains(msg, "unexpected additional properties") {
				msg = "is not an input of this workflow"
			}
			out = append(out, errs.FieldError{Field: field + "." + name, Message: msg})
		}
	}
	if len(out) == 0 {
		out = append(out, errs.FieldError{Field: field, Message: clean(whole.Error())})
	}
	return out
}

func invalidInput(op, field string, details []errs.FieldError) *errs.Error {
	msg := field + " does not match its schema"
	if field == "input" {
		msg = "the run's input does not match the workflow's inputSchema"
	}
	return &errs.Error{Op: op, Kind: errs.Invalid, Code: CodeInvalidInput, Message: msg + ": " + errs.Summarize(details), Details: details}
}

// plain returns a copy of input as encoding/json decodes JSON (maps,
// slices, float64, ...), so the validator sees JSON types.
func plain(input map[string]any) (map[string]any, error) {
	if input == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]any{}
	}
	return out, nil
}

var validatingRe = regexp.MustCompile(`^(validating [^:]*: )+`)

// maxMessage bounds one problem's message: the validator explains a
// failed anyOf with each branch's failure, nested, which a schema within
// the cost bound can still make megabytes long.
const maxMessage = 1000

// clean drops the validator's "validating <schema path>: " prefixes and
// cuts the message to maxMessage bytes (at a character's boundary).
func clean(msg string) string {
	msg = validatingRe.ReplaceAllString(msg, "")
	msg = strings.TrimPrefix(msg, "jsonschema.Schema: ")
	msg = strings.TrimPrefix(msg, "<anonymous schema>: ")
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + " (cut)"
	}
	return msg
}

// located keeps where the validator found a problem in a schema:
// "validating /properties/n: x" becomes "at /properties/n: x".
func located(msg string) string {
	msg = strings.ReplaceAll(msg, "validating root: ", "")
	return clean(strings.ReplaceAll(msg, "validating /", "at /"))
}

// cleanUnmarshal shortens encoding/json's errors about the library's
// internal types.
func cleanUnmarshal(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		for _, p := range []string{"schemaWithoutMethods.", ".schemaWithoutMethods"} {
			field = strings.ReplaceAll(field, p, "")
		}
		if field == "" {
			return fmt.Sprintf("a %s where a schema is expected", te.Value)
		}
		return fmt.Sprintf("%s: a %s is not a valid value", field, te.Value)
	}
	return clean(err.Error())
}
