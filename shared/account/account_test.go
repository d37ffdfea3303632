package account_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/account"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/usage"
)

// TestEraserFinishesAfterAFailure: a deletion is queued with the account's
// end (the credential gone at once); an erasure whose part fails leaves it
// queued and the parts after it unrun; the next sweep runs every part
// again, as the deleted user, and only then removes the request. A second
// deletion of the same account is refused (its credential is gone).
func TestEraserFinishesAfterAFailure(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	users := store.NewUsers(db.DB, db.Users(), db.Sessions())
	accounts := store.NewAccounts(db.DB, db.Users(), db.Sessions(), db.Data(), db.OAuth())
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	u := auth.User{ID: "2f1c4d7e-0000-4000-8000-000000000001", Email: "gone@example.com", Name: "Gone", CreatedAt: now.AddDate(0, -3, 0), UpdatedAt: now}
	if err := users.CreateUser(ctx, u, "hash", auth.Session{TokenHash: "t1", User: u, CreatedAt: now, RenewedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := accounts.BeginDeletion(ctx, u, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := users.Credential(ctx, u.Email); !errs.Is(err, errs.NotFound) {
		t.Fatalf("the credential after the deletion: %v, want NotFound", err)
	}
	if err := accounts.BeginDeletion(ctx, u, now); !errs.Is(err, errs.NotFound) {
		t.Errorf("a second deletion: %v, want NotFound", err)
	}

	var ran []string
	fail := true
	part := func(name string) account.Part {
		return account.Part{Name: name, Erase: func(ctx context.Context, d account.Deletion) error {
			if auth.UserID(ctx) != u.ID || d.UserID != u.ID || !d.UserCreatedAt.Equal(u.CreatedAt) {
				t.Errorf("part %s ran for %q (acting %q, created %v)", name, d.UserID, auth.UserID(ctx), d.UserCreatedAt)
			}
			ran = append(ran, name)
			if name == "second" && fail {
				fail = false
				return errors.New("storage hiccup")
			}
			return nil
		}}
	}
	e := account.NewEraser(accounts, nil, part("first"), part("second"), part("third"), account.Part{Name: "items", Erase: accounts.EraseUserItems})
	if n, err := e.Sweep(ctx); n != 0 || err == nil {
		t.Fatalf("first sweep: %d finished, %v; want 0 and the part's error", n, err)
	}
	if pending, err := accounts.PendingDeletions(ctx, now, 10); err != nil || len(pending) != 1 {
		t.Fatalf("after a failed erasure the queue holds %v, %v; want the deletion", pending, err)
	}
	if n, err := e.Sweep(ctx); n != 1 || err != nil {
		t.Fatalf("second sweep: %d, %v; want 1 finished", n, err)
	}
	if want := "first second first second third"; strings.Join(ran, " ") != want {
		t.Errorf("parts ran %q, want %q", strings.Join(ran, " "), want)
	}
	if pending, err := accounts.PendingDeletions(ctx, now, 10); err != nil || len(pending) != 0 {
		t.Errorf("after the erasure the queue holds %v, %v", pending, err)
	}
	if _, err := users.Session(ctx, "t1"); !errs.Is(err, errs.NotFound) {
		t.Errorf("the session after the erasure: %v", err)
	}
	if n, err := e.Sweep(ctx); n != 0 || err != nil {
		t.Errorf("an empty queue's sweep: %d, %v", n, err)
	}
}

// TestEraserRunsALastPass: with a last pass, the first sweep erases the
// account and keeps the request queued, not due until the window has
// passed since the request; a reply under way at the deletion settles its
// model call after the erasure and writes no usage back; what a writer
// without a session left meanwhile (here a usage record made without a
// reservation) is erased by the last pass, which removes the request.
func TestEraserRunsALastPass(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	users := store.NewUsers(db.DB, db.Users(), db.Sessions())
	accounts := store.NewAccounts(db.DB, db.Users(), db.Sessions(), db.Data(), db.OAuth())
	uses := store.NewUsage(db.DB, db.Users())
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	meter := usage.NewMeter(uses, 1_000_000, nil, clock)
	u := auth.User{ID: "2f1c4d7e-0000-4000-8000-000000000002", Email: "late@example.com", Name: "Late", CreatedAt: now.AddDate(0, -1, 0), UpdatedAt: now}
	if err := users.CreateUser(ctx, u, "hash", auth.Session{TokenHash: "t2", User: u, CreatedAt: now, RenewedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// A model call under way: its reservation wrote the month's counter.
	r, err := meter.Reserve(ctx, u.ID, 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := accounts.BeginDeletion(ctx, u, now); err != nil {
		t.Fatal(err)
	}
	passes := 0
	e := account.NewEraser(accounts, nil, account.Part{Name: "count", Erase: func(context.Context, account.Deletion) error { passes++; return nil }},
		account.Part{Name: "items", Erase: accounts.EraseUserItems}).WithLastPass(16*time.Minute, clock)
	if _, err := e.Sweep(ctx); err != nil || passes != 1 {
		t.Fatalf("first sweep: %v, %d passes", err, passes)
	}
	month := usage.Month(now)
	// The call ends after the erasure: its settle writes nothing.
	if err := meter.Settle(ctx, r, "builtin", usage.Counts{Requests: 1, InputTokens: 10, OutputTokens: 5}); err != nil {
		t.Fatal(err)
	}
	if c, err := uses.MonthUsage(ctx, u.ID, month); err != nil || len(c) != 0 {
		t.Fatalf("usage after the erasure and a late settle: %v, %v; want none", c, err)
	}
	if c, _ := uses.Committed(ctx, u.ID, month); c != 0 {
		t.Fatalf("committed after the erasure: %d, want no item", c)
	}
	// A late write that creates an item; the queue has nothing due yet.
	if err := meter.Record(ctx, u.ID, "builtin", usage.Counts{Requests: 1, InputTokens: 1}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(15 * time.Minute)
	if pending, err := accounts.PendingDeletions(ctx, now, 10); err != nil || len(pending) != 0 {
		t.Fatalf("due before the window: %v, %v; want none", pending, err)
	}
	if _, err := e.Sweep(ctx); err != nil || passes != 1 {
		t.Fatalf("sweep within the window: %v, %d passes; want no pass", err, passes)
	}
	now = now.Add(2 * time.Minute)
	if n, err := e.Sweep(ctx); err != nil || n != 1 || passes != 2 {
		t.Fatalf("last pass: %d finished, %v, %d passes", n, err, passes)
	}
	if c, err := uses.MonthUsage(ctx, u.ID, month); err != nil || len(c) != 0 {
		t.Errorf("usage after the last pass: %v, %v; want none", c, err)
	}
	if pending, err := accounts.PendingDeletions(ctx, now.Add(time.Hour), 10); err != nil || len(pending) != 0 {
		t.Errorf("the queue after the last pass: %v, %v", pending, err)
	}
}
