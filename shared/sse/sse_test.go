package sse_test

import (
	"net/http/httptest"
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
