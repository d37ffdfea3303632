package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/workflowchat/service/shared/errs"
)

// MaxBodyBytes is the largest request body accepted (1 MiB); larger bodies
// get 413.
const MaxBodyBytes = 1 << 20

// Validator is implemented by request types that check their own fields.
// Validate returns an errs.Invalid error (usually errs.FieldErrors.Err).
type Validator interface {
	Validate() error
}

// Empty is the input type of endpoints that take no body, and the output
// type of endpoints that answer 204 No Content.
type Empty struct{}

// Decode reads r's JSON body into a T and validates it when T implements
// Validator. Unknown fields are ignored. It fails with INVALID_JSON for
// malformed JSON, an empty body or trailing data, VALIDATION_FAILED with
// field details for wrongly typed or invalid fields, and PAYLOAD_TOO_LARGE
// for bodies over MaxBodyBytes.
func Decode[T any](r *http.Request) (T, error) {
	return decode[T](r, "httpapi.Decode", false)
}

// DecodeOptional is Decode for a route whose body may be left out: an
// empty body (or only white space, whatever Content-Length says, chunked
// included) is T's zero value, not validated; any other body is decoded
// and validated as Decode does, with its errors.
func DecodeOptional[T any](r *http.Request) (T, error) {
	return decode[T](r, "httpapi.DecodeOptional", true)
}

func decode[T any](r *http.Request, op string, optional bool) (T, error) {
	var v T
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return v, BodyTooLarge(op, tooLarge.Limit)
		}
		return v, errs.E(op, errs.Invalid, "INVALID_BODY", "could not read the request body").WithCause(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return v, nil
		}
		return v, errs.E(op, errs.Invalid, "INVALID_JSON", "request body must be a JSON object")
	}
	if err := UnmarshalStrict(body, &v); err != nil {
		return v, errs.Wrap(op, err)
	}
	if val, ok := any(&v).(Validator); ok {
		if err := val.Validate(); err != nil {
			return v, err
		}
	} else if val, ok := any(v).(Validator); ok {
		if err := val.Validate(); err != nil {
			return v, err
		}
	}
	return v, nil
}

// UnmarshalStrict decodes one JSON object from data into v, with the error
// kinds and codes Decode documents.
func UnmarshalStrict(data []byte, v any) error {
	const op = "httpapi.UnmarshalStrict"
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errs.E(op, errs.Invalid, "INVALID_JSON", "request body must be a JSON object")
	}
	// Syntax first (one value, nothing after it), then types, so that a
	// malformed body is always INVALID_JSON.
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return errs.E(op, errs.Invalid, "INVALID_JSON", "request body is not valid JSON").WithCause(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errs.E(op, errs.Invalid, "INVALID_JSON", "request body has data after the JSON object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return errs.Fields(op, errs.FieldError{Field: indexedField(raw, typeErr), Message: "must be " + jsonTypeName(typeErr.Type.Kind().String())})
		}
		return errs.E(op, errs.Invalid, "INVALID_JSON", "request body is not valid JSON").WithCause(err)
	}
	return nil
}

// indexedField is the field of type error e in the JSON object raw with
// the index of each array on its way, e.g. steps[1].retry.maxAttempts
// where encoding/json says steps.retry.maxAttempts: the first value, in
// the document's order, at that path whose JSON type is the one e found
// (encoding/json reports the earliest). Without one, e's own field.
func indexedField(raw []byte, e *json.UnmarshalTypeError) string {
	var doc any
	if json.Unmarshal(raw, &doc) != nil {
		return e.Field
	}
	want, _, _ := strings.Cut(e.Value, " ") // "number 1.5": a number
	if path, ok := findTyped(doc, strings.Split(e.Field, "."), want); ok {
		return strings.TrimPrefix(path, ".")
	}
	return e.Field
}

// findTyped returns the path below v (".name" and "[i]" parts) of the
// first value at the object path names whose JSON type is want,
// descending into every array on the way.
func findTyped(v any, names []string, want string) (string, bool) {
	if list, ok := v.([]any); ok {
		for i, el := range list {
			if p, ok := findTyped(el, names, want); ok {
				return "[" + strconv.Itoa(i) + "]" + p, true
			}
		}
		if len(names) > 0 {
			return "", false
		}
	}
	if len(names) == 0 {
		return "", jsonType(v) == want
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	child, ok := obj[names[0]]
	if !ok {
		return "", false
	}
	p, ok := findTyped(child, names[1:], want)
	return "." + names[0] + p, ok
}

// jsonType is the name encoding/json's type errors give v's JSON type.
func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

func jsonTypeName(goKind string) string {
	switch {
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "slice", goKind == "array":
		return "an array"
	default:
		return "an object"
	}
}

// Endpoint adapts fn to an http.Handler: it decodes and validates the JSON
// body into In (skipped when In is Empty), calls fn, and writes fn's result
// wrapped in {"data": ...} with the given status (no body when Out is Empty).
// Any error, from decoding or from fn, goes through WriteError.
func Endpoint[In, Out any](status int, fn func(w http.ResponseWriter, r *http.Request, in In) (Out, error)) http.Handler {
	_, noBody := any(*new(In)).(Empty)
	_, noOutput := any(*new(Out)).(Empty)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in In
		if !noBody {
			var err error
			if in, err = Decode[In](r); err != nil {
				WriteError(w, r, err)
				return
			}
		}
		out, err := fn(w, r, in)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		if noOutput {
			w.WriteHeader(status)
			return
		}
		Respond(w, status, out)
	})
}
