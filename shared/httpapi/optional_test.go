package httpapi_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// chunked is a body of unknown length (Content-Length -1), as a client
// sending Transfer-Encoding: chunked gives.
type chunked struct{ io.Reader }

func TestDecodeOptional(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		body    io.Reader
		want    createReq
		code    string
		kind    errs.Kind
		details string
	}{
		{name: "no body", body: http.NoBody},
		{name: "empty body", body: strings.NewReader("")},
		{name: "white space only", body: strings.NewReader(" \r\n\t ")},
		{name: "empty, of unknown length", body: chunked{strings.NewReader("")}},
		{name: "a body", body: strings.NewReader(`{"name":"a","count":2}`), want: createReq{Name: "a", Count: 2}},
		{name: "a body of unknown length", body: chunked{strings.NewReader(`{"name":"b"}`)}, want: createReq{Name: "b"}},
		{name: "malformed", body: strings.NewReader(`{`), code: "INVALID_JSON", kind: errs.Invalid},
		{name: "not an object", body: strings.NewReader(`[]`), code: "INVALID_JSON", kind: errs.Invalid},
		{name: "trailing data", body: strings.NewReader(`{"name":"a"} x`), code: "INVALID_JSON", kind: errs.Invalid},
		{name: "wrong type", body: strings.NewReader(`{"count":"x"}`), code: "VALIDATION_FAILED", kind: errs.Invalid, details: "count"},
		{name: "given but invalid", body: strings.NewReader(`{"count":1}`), code: "VALIDATION_FAILED", kind: errs.Invalid, details: "name"},
		{name: "at the limit", body: strings.NewReader(`{"name":"` + strings.Repeat("a", httpapi.MaxBodyBytes-11) + `"}`), want: createReq{Name: strings.Repeat("a", httpapi.MaxBodyBytes-11)}},
		{name: "one byte over", body: strings.NewReader(`{"name":"` + strings.Repeat("a", httpapi.MaxBodyBytes-10) + `"}`), code: "PAYLOAD_TOO_LARGE", kind: errs.TooLarge},
		{name: "white space over the limit", body: strings.NewReader(strings.Repeat(" ", httpapi.MaxBodyBytes+1)), code: "PAYLOAD_TOO_LARGE", kind: errs.TooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/x", tc.body)
			got, err := httpapi.DecodeOptional[createReq](r)
			if tc.code == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			var e *errs.Error
			// A body too large has its code from its kind (WriteError).
			if !errors.As(err, &e) || e.Kind != tc.kind || (e.Kind != errs.TooLarge && e.Code != tc.code) {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
			if tc.details != "" && (len(e.Details) == 0 || e.Details[0].Field != tc.details) {
				t.Errorf("details = %+v, want %s", e.Details, tc.details)
			}
		})
	}
}
