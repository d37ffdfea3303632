package sse_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/sse"
)

func TestCommentCannotBreakTheStream(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	w := sse.NewWriter(rec)
	if err := w.Comment("ping\n\ndata: {\"type\":\"end\"}\r\n"); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Body.String(), ": ping  data: {\"type\":\"end\"} \n\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
}

func TestEncodeWithID(t *testing.T) {
	t.Parallel()
	b, err := sse.EncodeWithID("m:3", map[string]string{"type": "end"})
	if err != nil || string(b) != "id: m:3\ndata: {\"type\":\"end\"}\n\n" {
		t.Errorf("EncodeWithID = %q, %v", b, err)
	}
	for _, bad := range []string{"a\nb", "a\rb", "a\x00b"} {
		if _, err := sse.EncodeWithID(bad, 1); err == nil {
			t.Errorf("EncodeWithID(%q) accepted the id", bad)
		}
	}
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct {
	*httptest.ResponseRecorder
	left int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.left {
		return 0, errors.New("client gone")
	}
	f.left -= len(p)
	return f.ResponseRecorder.Write(p)
}

// TestQueue: events queued faster than they are written all arrive in
// order; after a failed write the rest are dropped and Close reports it,
// without blocking the producer.
func TestQueue(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	q := sse.NewQueue(sse.NewWriter(rec))
	for i := range 100 {
		q.Send(fmt.Sprint(i), i)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	body := rec.Body.String()
	if strings.Count(body, "data: ") != 100 || !strings.HasSuffix(body, "id: 99\ndata: 99\n\n") {
		t.Errorf("body %q", body)
	}

	fw := &failingWriter{ResponseRecorder: httptest.NewRecorder(), left: 30}
	q = sse.NewQueue(sse.NewWriter(fw))
	for i := range 10 {
		q.Send(fmt.Sprint(i), i)
	}
	if err := q.Close(); err == nil {
		t.Error("Close after a failed write: nil error")
	}
}
