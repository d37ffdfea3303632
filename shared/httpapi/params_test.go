package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/httpapi"
)

// TestPathIDs: a malformed id is told before the body is read.
func TestPathIDs(t *testing.T) {
	t.Parallel()
	const id = "0b7c9a38-8f0c-4e43-9d7a-5bb1a3c5d0e1"
	mux := http.NewServeMux()
	mux.Handle("POST /a/{aId}/b/{bId}", httpapi.PathIDs(httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in createReq) (created, error) {
		return created(in), nil
	}), "aId", "bId"))
	for _, tc := range []struct {
		path, body string
		status     int
		field      string
	}{
		{"/a/x/b/" + id, `{`, 400, "aId"},
		{"/a/" + id + "/b/x", `{"count":"x"}`, 400, "bId"},
		{"/a/x/b/y", ``, 400, "aId"},
		{"/a/" + id + "/b/" + id, `{`, 400, ""},
		{"/a/" + id + "/b/" + id, `{"name":"n"}`, 200, ""},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body)))
		if rec.Code != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.path, tc.body, rec.Code, rec.Body, tc.status)
			continue
		}
		if tc.field != "" && (!strings.Contains(rec.Body.String(), `"code":"INVALID_ID"`) || !strings.Contains(rec.Body.String(), `"field":"`+tc.field+`"`)) {
			t.Errorf("%s %s: %s, want INVALID_ID naming %s", tc.path, tc.body, rec.Body, tc.field)
		}
		if tc.field == "" && strings.Contains(rec.Body.String(), "INVALID_ID") {
			t.Errorf("%s %s: %s", tc.path, tc.body, rec.Body)
		}
	}
}

// TestPathUUIDLowerCases: an upper-case id is the id its lower-case form
// is (ids are stored lower-cased): PathUUID answers it lower-cased, and a
// handler behind PathIDs reads it so from the path.
func TestPathUUIDLowerCases(t *testing.T) {
	t.Parallel()
	const lower = "0b7c9a38-8f0c-4e43-9d7a-5bb1a3c5d0e1"
	upper := strings.ToUpper(lower)
	mux := http.NewServeMux()
	var got, read string
	mux.Handle("GET /a/{aId}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := httpapi.PathUUID(r, "aId")
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		got, read = id, r.PathValue("aId")
	}))
	mux.Handle("GET /b/{bId}", httpapi.PathIDs(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read = r.PathValue("bId")
	}), "bId"))
	for _, path := range []string{"/a/" + upper, "/a/" + lower, "/a/0B7c9a38-8F0C-4e43-9d7A-5bb1a3c5d0E1"} {
		got, read = "", ""
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK || got != lower || read != lower {
			t.Errorf("%s: %d, id %q, path value %q; want %q", path, rec.Code, got, read, lower)
		}
	}
	read = ""
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/b/"+upper, nil))
	if rec.Code != http.StatusOK || read != lower {
		t.Errorf("PathIDs: %d, path value %q; want %q", rec.Code, read, lower)
	}
}
