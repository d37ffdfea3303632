package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// fuzzRequest is a representative request body: every JSON kind, nested
// structs, slices, arrays, maps, pointers, raw JSON and interfaces, plus a
// Validate method, so that the fuzzer meets type errors at every depth.
// arrayIndex is an array index in a field's path, "[3]".
var arrayIndex = regexp.MustCompile(`\[[0-9]+\]`)

type fuzzRequest struct {
	Name    string          `json:"name"`
	Count   int             `json:"count"`
	Small   uint8           `json:"small"`
	Score   float64         `json:"score"`
	Enabled bool            `json:"enabled"`
	Tags    []string        `json:"tags"`
	Pair    [2]int          `json:"pair"`
	Note    *string         `json:"note"`
	Limits  map[string]int  `json:"limits"`
	Inputs  map[string]any  `json:"inputs"`
	Raw     json.RawMessage `json:"raw"`
	Any     any             `json:"any"`
	Nested  struct {
		ID    string `json:"id"`
		Items []struct {
			N   int      `json:"n"`
			Opt *float64 `json:"opt"`
		} `json:"items"`
	} `json:"nested"`
}

// Validate fails for a negative count, so that Decode's validation path is
// reachable without making most inputs invalid.
func (r fuzzRequest) Validate() error {
	var f errs.FieldErrors
	if r.Count < 0 {
		f.Add("count", "must not be negative")
	}
	return f.Err("fuzzRequest.Validate")
}

// fuzzDecodeSeeds are the f.Add seeds of FuzzDecode and FuzzUnmarshalStrict
// (testdata/fuzz holds more).
var fuzzDecodeSeeds = []string{
	``,
	`   `,
	`{}`,
	` {"name":"a","count":3} `,
	`{"name":"a","count":-1}`,
	`{"count":"3"}`,
	`{"count":1.5}`,
	`{"small":256}`,
	`{"score":1e400}`,
	`{"tags":["a",1]}`,
	`{"pair":[1,2,3]}`,
	`{"limits":{"a":"b"}}`,
	`{"nested":{"items":[{"n":"x"}]}}`,
	`{"nested":{"items":[{"opt":true}]}}`,
	`{"raw":{"x":[1,{"y":null}]},"any":[1,"a",{}]}`,
	`{"a":1}{"b":2}`,
	`{"a":1} x`,
	`{"a":`,
	`[]`,
	`[{"name":"a"}]`,
	`"string"`,
	`null`,
	`42`,
	"\xef\xbb\xbf{}",
	"\u00a0{}",
	`{"name":"\ud800"}`,
	"{\"name\":\"\xff\"}",
}

// FuzzDecode decodes arbitrary bytes into fuzzRequest through an
// http.Request with httpapi.Decode. The mode byte picks the transport: a
// plain body, a body over MaxBodyBytes, or a body whose reader fails after
// the data. Properties:
//   - every error is an *errs.Error of kind Invalid or TooLarge with a code
//     among INVALID_JSON, VALIDATION_FAILED, PAYLOAD_TOO_LARGE and
//     INVALID_BODY (TooLarge exactly for PAYLOAD_TOO_LARGE), a client
//     message, field details for VALIDATION_FAILED, and status 400 or 413;
//   - an oversized body is always PAYLOAD_TOO_LARGE and a failing reader
//     always INVALID_BODY;
//   - success implies the body is one JSON object (json.Valid, '{' first),
//     and any other body is INVALID_JSON, but for a complete object with
//     wrongly typed fields followed by trailing data, which is
//     VALIDATION_FAILED (see fuzzCheckNotObjectCode);
//   - for a JSON object, Decode agrees with json.Unmarshal followed by
//     Validate, decodes the same value, and says INVALID_JSON only when
//     json.Unmarshal reports a type error without a field (a number out of
//     range at the top level).
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzDecodeSeeds {
		f.Add([]byte(s), uint8(0))
	}
	f.Add([]byte(`{"name":"a"}`), uint8(1))
	f.Add([]byte(`{"name":"a"}`), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		var body io.Reader = bytes.NewReader(data)
		switch mode % 8 {
		case 1: // over the limit: the padding is JSON whitespace
			body = io.MultiReader(bytes.NewReader(data), bytes.NewReader(bytes.Repeat([]byte{' '}, httpapi.MaxBodyBytes+1)))
		case 2: // the connection fails after the data
			body = io.MultiReader(bytes.NewReader(data), fuzzFailingReader{})
		}
		r := httptest.NewRequest(http.MethodPost, "/fuzz", body)
		got, err := httpapi.Decode[fuzzRequest](r)
		switch mode % 8 {
		case 1:
			if e := fuzzCheckDecodeError(t, err); e.CodeOrDefault() != "PAYLOAD_TOO_LARGE" {
				t.Fatalf("oversized body: code %s, want PAYLOAD_TOO_LARGE", e.CodeOrDefault())
			}
			return
		case 2:
			if e := fuzzCheckDecodeError(t, err); e.CodeOrDefault() != "INVALID_BODY" {
				t.Fatalf("failing reader: code %s, want INVALID_BODY", e.CodeOrDefault())
			}
			return
		}
		if err != nil {
			fuzzCheckDecodeError(t, err)
		}
		if err == nil && !fuzzIsJSONObject(data) {
			t.Fatalf("Decode(%q) succeeded, but the body is not one JSON object", data)
		}
		if !fuzzIsJSONObject(data) {
			fuzzCheckNotObjectCode(t, data, err)
			return
		}
		var want fuzzRequest
		wantErr := json.Unmarshal(data, &want)
		if wantErr == nil {
			wantErr = want.Validate()
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("Decode(%q) error = %v, but json.Unmarshal+Validate error = %v", data, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %+v, json.Unmarshal = %+v", data, got, want)
		}
		if err != nil && errs.CodeOf(err) == "INVALID_JSON" {
			var typeErr *json.UnmarshalTypeError
			if !errors.As(wantErr, &typeErr) || typeErr.Field != "" {
				t.Fatalf("Decode(%q): INVALID_JSON for a JSON object (json.Unmarshal: %v)", data, wantErr)
			}
		}
	})
}

// FuzzUnmarshalStrict decodes arbitrary bytes with httpapi.UnmarshalStrict
// into fuzzRequest and into a map. Properties: errors as for FuzzDecode
// (Invalid only: INVALID_JSON or VALIDATION_FAILED); success implies one
// JSON object; on a JSON object it agrees with json.Unmarshal, into a
// map[string]any (which fails only for a number out of float64's range)
// and into the struct, with the same value, and a type error on a named
// field is VALIDATION_FAILED naming that field.
func FuzzUnmarshalStrict(f *testing.F) {
	for _, s := range fuzzDecodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		obj := fuzzIsJSONObject(data)

		var m map[string]any
		err := httpapi.UnmarshalStrict(data, &m)
		if err != nil {
			fuzzCheckStrictError(t, err)
		}
		if !obj && err == nil {
			t.Fatalf("UnmarshalStrict(%q, map) succeeded, but the body is not one JSON object", data)
		}
		if obj {
			// Only a number out of float64's range fails a JSON object
			// into a map; json.Unmarshal decides.
			var ref map[string]any
			if wantErr := json.Unmarshal(data, &ref); (err == nil) != (wantErr == nil) {
				t.Fatalf("UnmarshalStrict(%q, map) error = %v, but json.Unmarshal error = %v", data, err, wantErr)
			}
		}

		var got fuzzRequest
		err = httpapi.UnmarshalStrict(data, &got)
		if err != nil {
			fuzzCheckStrictError(t, err)
		}
		if !obj {
			fuzzCheckNotObjectCode(t, data, err)
			return
		}
		var want fuzzRequest
		wantErr := json.Unmarshal(data, &want)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("UnmarshalStrict(%q) error = %v, but json.Unmarshal error = %v", data, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("UnmarshalStrict(%q) = %+v, json.Unmarshal = %+v", data, got, want)
		}
		var typeErr *json.UnmarshalTypeError
		if err != nil && errors.As(wantErr, &typeErr) && typeErr.Field != "" {
			e := fuzzCheckStrictError(t, err)
			// The field is encoding/json's with each array's index on
			// the way (steps[1].id for steps.id).
			if e.CodeOrDefault() != "VALIDATION_FAILED" || len(e.Details) != 1 || arrayIndex.ReplaceAllString(e.Details[0].Field, "") != typeErr.Field {
				t.Fatalf("UnmarshalStrict(%q) = %+v, want VALIDATION_FAILED on field %q", data, e, typeErr.Field)
			}
		}
	})
}

// fuzzCheckNotObjectCode checks the error for a body that is not one JSON
// object: INVALID_JSON, except that a body starting with a complete JSON
// object whose fields have the wrong types, followed by trailing data, is
// reported as VALIDATION_FAILED (the type error is found while the first
// value is decoded, before the trailing data is looked at; see the seeds
// trailing-data-after-type-error).
func fuzzCheckNotObjectCode(t *testing.T, data []byte, err error) {
	t.Helper()
	switch code := errs.CodeOf(err); {
	case err == nil:
		t.Fatalf("%q decoded, but it is not one JSON object", data)
	case code == "INVALID_JSON":
	case code == "VALIDATION_FAILED" && fuzzLeadingObject(data):
	default:
		t.Fatalf("%q: code %s, want INVALID_JSON for a body that is not a JSON object", data, code)
	}
}

// fuzzLeadingObject reports whether data starts with a complete JSON object.
func fuzzLeadingObject(data []byte) bool {
	var raw json.RawMessage
	return json.NewDecoder(bytes.NewReader(data)).Decode(&raw) == nil && raw[0] == '{'
}

type fuzzFailingReader struct{}

func (fuzzFailingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// fuzzIsJSONObject reports whether data is one JSON value, an object, with only
// JSON whitespace around it.
func fuzzIsJSONObject(data []byte) bool {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	return json.Valid(data) && len(trimmed) > 0 && trimmed[0] == '{'
}

// fuzzCheckDecodeError checks the contract of every Decode error and returns it.
func fuzzCheckDecodeError(t *testing.T, err error) *errs.Error {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not an *errs.Error", err, err)
	}
	code := e.CodeOrDefault()
	if !slices.Contains([]string{"INVALID_JSON", "VALIDATION_FAILED", "PAYLOAD_TOO_LARGE", "INVALID_BODY"}, code) {
		t.Fatalf("error %v: unexpected code %q", err, code)
	}
	if want := code == "PAYLOAD_TOO_LARGE"; (e.Kind == errs.TooLarge) != want || (e.Kind != errs.Invalid && e.Kind != errs.TooLarge) {
		t.Fatalf("error %v: kind %s with code %s", err, e.Kind, code)
	}
	if e.Message == "" {
		t.Fatalf("error %v has no client message", err)
	}
	if code == "VALIDATION_FAILED" && (len(e.Details) == 0 || e.Details[0].Field == "") {
		t.Fatalf("error %v: VALIDATION_FAILED without field details", err)
	}
	if s := httpapi.StatusOf(err); s != http.StatusBadRequest && s != http.StatusRequestEntityTooLarge {
		t.Fatalf("error %v: status %d", err, s)
	}
	return e
}

// fuzzCheckStrictError checks an UnmarshalStrict error: a Decode error that
// can only be INVALID_JSON or VALIDATION_FAILED.
func fuzzCheckStrictError(t *testing.T, err error) *errs.Error {
	t.Helper()
	e := fuzzCheckDecodeError(t, err)
	if c := e.CodeOrDefault(); c != "INVALID_JSON" && c != "VALIDATION_FAILED" {
		t.Fatalf("UnmarshalStrict error %v: code %s", err, c)
	}
	return e
}
