package tools

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/schema"
)

// checkObjectSchema checks, without compiling it, that raw is a JSON object
// whose "type" is "object": what NewRegistry requires of every schema. It
// fails on an empty or invalid document, a non-object and another type.
func checkObjectSchema(raw []byte) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return errors.New("schema is empty")
	}
	if !json.Valid(raw) {
		return errors.New("schema is not valid JSON")
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return errors.New("schema is not a JSON object")
	}
	var typ string
	if json.Unmarshal(top["type"], &typ) != nil || typ != "object" {
		return errors.New(`schema must have "type": "object" at the top`)
	}
	return nil
}

// fieldErrors turns schema problems into field errors: the field is the
// problem's location as a JSON pointer without the leading slash ("query",
// "headers/x-token"; a missing or disallowed property is located at the
// property), with the problem's message, sorted by field then message.
func fieldErrors(problems []schema.Problem) []errs.FieldError {
	out := make([]errs.FieldError, len(problems))
	for i, p := range problems {
		out[i] = errs.FieldError{Field: p.Pointer(), Message: p.Message}
	}
	slices.SortFunc(out, func(a, b errs.FieldError) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Message, b.Message))
	})
	return out
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
