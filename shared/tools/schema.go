package tools

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/workflowchat/service/shared/errs"
)

// noLoader refuses every external schema reference: tool schemas must be
// self-contained, and compiling one must never read a file or the network.
type noLoader struct{}

// Load implements jsonschema.URLLoader; it always fails.
func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q is not allowed", url)
}

// newCompiler returns a JSON Schema compiler for draft 2020-12 that loads
// nothing from outside.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	return c
}

// compileObjectSchema parses raw, checks that it is a JSON object whose
// "type" is "object", and compiles it under the resource name loc. It fails
// on invalid JSON, a non-object schema, or a schema the compiler rejects.
func compileObjectSchema(c *jsonschema.Compiler, loc string, raw []byte) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("schema is empty")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("schema is not a JSON object")
	}
	if typ, _ := obj["type"].(string); typ != "object" {
		return nil, errors.New(`schema must have "type": "object" at the top`)
	}
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// fieldErrors turns a schema validation error into field errors: one per
// failing leaf, located by a JSON-pointer-like path without the leading
// slash ("query", "headers/x-token"), with the validator's message. A
// missing or disallowed property is reported at the property's own path.
// The result is sorted by field, then message.
func fieldErrors(err error) []errs.FieldError {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []errs.FieldError{{Field: "", Message: err.Error()}}
	}
	p := message.NewPrinter(language.English)
	var out []errs.FieldError
	// walk collects the leaves under e; at, when not nil, replaces the
	// instance location of every leaf (errors about a property name are
	// located at the property).
	var walk func(e *jsonschema.ValidationError, at []string)
	walk = func(e *jsonschema.ValidationError, at []string) {
		loc := e.InstanceLocation
		if at != nil {
			loc = at
		}
		if k, ok := e.ErrorKind.(*kind.PropertyNames); ok {
			if obj, ok := propertyNamesLocation(e.SchemaURL); ok && at == nil {
				loc = obj
			}
			if len(e.Causes) > 0 {
				at = append(slices.Clip(loc), k.Property)
			}
		}
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c, at)
			}
			return
		}
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				msg := (&kind.Required{Missing: []string{m}}).LocalizedString(p)
				out = append(out, errs.FieldError{Field: pointer(append(slices.Clip(loc), m)), Message: msg})
			}
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				msg := (&kind.AdditionalProperties{Properties: []string{name}}).LocalizedString(p)
				out = append(out, errs.FieldError{Field: pointer(append(slices.Clip(loc), name)), Message: msg})
			}
		case *kind.PropertyNames:
			out = append(out, errs.FieldError{Field: pointer(append(slices.Clip(loc), k.Property)), Message: k.LocalizedString(p)})
		default:
			out = append(out, errs.FieldError{Field: pointer(loc), Message: k.LocalizedString(p)})
		}
	}
	walk(ve, nil)
	slices.SortFunc(out, func(a, b errs.FieldError) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(out)
}

// propertyNamesLocation rebuilds the instance location of the object whose
// property name failed a propertyNames schema, from the keyword location
// schemaURL ("...#/properties/headers/propertyNames" -> ["headers"]). It
// works around jsonschema v6.0.3, which reports such errors with the
// validator's live location slice, overwritten by the time validation ends.
// It reports false unless the keyword location is a plain chain of
// "properties" keywords.
func propertyNamesLocation(schemaURL string) ([]string, bool) {
	_, frag, ok := strings.Cut(schemaURL, "#")
	if !ok {
		return nil, false
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, false
	}
	toks := strings.Split(strings.TrimPrefix(frag, "/"), "/")
	if len(toks) == 0 || toks[len(toks)-1] != "propertyNames" || len(toks)%2 != 1 {
		return nil, false
	}
	loc := []string{}
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	for i := 0; i+1 < len(toks); i += 2 {
		if toks[i] != "properties" {
			return nil, false
		}
		loc = append(loc, unescape.Replace(toks[i+1]))
	}
	return loc, true
}

// pointer joins JSON pointer tokens with "/", escaping "~" and "/" as RFC
// 6901 does, without the leading slash.
func pointer(tokens []string) string {
	r := strings.NewReplacer("~", "~0", "/", "~1")
	esc := make([]string, len(tokens))
	for i, t := range tokens {
		esc[i] = r.Replace(t)
	}
	return strings.Join(esc, "/")
}

// invalidParams returns the INVALID_PARAMS error for the tool id with the
// given details. Its message names up to three fields.
func invalidParams(op, id string, details []errs.FieldError) *errs.Error {
	var b strings.Builder
	b.WriteString("invalid input for tool " + id)
	for i, d := range details {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(details)-3)
			break
		}
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if d.Field != "" {
			b.WriteString(d.Field + ": ")
		}
		b.WriteString(d.Message)
	}
	return &errs.Error{Op: op, Kind: errs.Invalid, Code: CodeInvalidParams, Message: b.String(), Details: details}
}

// invalidField returns an INVALID_PARAMS error about one input field, for
// tools to report input the schema cannot express (a pattern that does not
// compile, an unknown time zone).
func invalidField(field, format string, args ...any) *errs.Error {
	msg := fmt.Sprintf(format, args...)
	return &errs.Error{
		Kind:    errs.Invalid,
		Code:    CodeInvalidParams,
		Message: field + ": " + msg,
		Details: []errs.FieldError{{Field: field, Message: msg}},
	}
}
