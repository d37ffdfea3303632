package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/audit"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestAuditLog: events are listed newest first, per user, in pages that
// together hold every event once; an event keeps its origin and details;
// a cursor that the list did not return is 400; erasing a user's log
// leaves other users' logs.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewAudit(db.DB, db.Data())
	ctx := context.Background()
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := base
	log := audit.NewLog(s, func() time.Time { return clock }, nil)
	octx := httpapi.WithOrigin(ctx, httpapi.Origin{IP: "203.0.113.7", UserAgent: "test-agent/1"})
	const n = 7
	for i := range n {
		clock = base.Add(time.Duration(i) * time.Second)
		log.Record(octx, "u1", audit.SignIn, map[string]any{"i": float64(i)})
	}
	log.Record(octx, "u2", audit.SignInFailed, nil)

	var got []audit.Event
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("pagination does not end")
		}
		p, err := log.List(ctx, "u1", 3, cursor)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Events...)
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if len(got) != n {
		t.Fatalf("listed %d events, want %d", len(got), n)
	}
	for i, e := range got {
		want := float64(n - 1 - i)
		if e.Details["i"] != want || e.Type != audit.SignIn || e.IP != "203.0.113.7" || e.UserAgent != "test-agent/1" ||
			!e.At.Equal(base.Add(time.Duration(want)*time.Second)) {
			t.Errorf("event %d = %+v, want the event %v of u1 with its origin", i, e, want)
		}
	}
	if _, err := log.List(ctx, "u1", 3, "not-a-cursor"); errs.CodeOf(err) != "INVALID_PAGINATION" {
		t.Errorf("a foreign cursor: %v, want INVALID_PAGINATION", err)
	}
	if err := s.DeleteAudit(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if p, err := log.List(ctx, "u1", 100, ""); err != nil || len(p.Events) != 0 {
		t.Errorf("after erasure u1 has %v, %v", p.Events, err)
	}
	if p, err := log.List(ctx, "u2", 100, ""); err != nil || len(p.Events) != 1 || p.Events[0].Type != audit.SignInFailed {
		t.Errorf("u2's log after u1's erasure: %v, %v", p.Events, err)
	}
}

// TestAuditDetailsBounded: a huge user agent or detail string is cut, so
// no request can make an event item too large to write.
func TestAuditDetailsBounded(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	s := store.NewAudit(db.DB, db.Data())
	ctx := httpapi.WithOrigin(context.Background(), httpapi.Origin{UserAgent: fmt.Sprintf("%0600000d", 0)})
	audit.NewLog(s, nil, nil).Record(ctx, "u1", audit.TokenCreated, map[string]any{"name": fmt.Sprintf("%0500000d", 0)})
	p, err := audit.NewLog(s, nil, nil).List(context.Background(), "u1", 10, "")
	if err != nil || len(p.Events) != 1 {
		t.Fatalf("events %v, %v; want the one event, cut", p.Events, err)
	}
	if e := p.Events[0]; len(e.Details["name"].(string)) != audit.MaxDetail || len(e.UserAgent) != audit.MaxUserAgent {
		t.Errorf("detail of %d bytes and user agent of %d kept, want %d and %d", len(e.Details["name"].(string)), len(e.UserAgent), audit.MaxDetail, audit.MaxUserAgent)
	}
}
