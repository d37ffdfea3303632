package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestRateLimitsCountWindows counts hits per user, rule and window: each
// key counts on its own, one call per hit, and the item's TTL attribute is
// the window's end plus the margin.
func TestRateLimitsCountWindows(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rl := store.NewRateLimits(db.DB, db.RateLimits())
	ctx := context.Background()
	minute := time.Date(2026, 4, 1, 12, 30, 0, 0, time.UTC)
	hit := func(user, rule string, start time.Time, window time.Duration) int64 {
		t.Helper()
		n, err := rl.Hit(ctx, user, rule, start, window)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	db.Counter.Reset()
	for want := int64(1); want <= 3; want++ {
		if n := hit("u1", "messages", minute, time.Minute); n != want {
			t.Fatalf("hit %d of u1/messages = %d", want, n)
		}
	}
	if c := db.Counter.Count(); c != 3 {
		t.Errorf("3 hits made %d DynamoDB calls, want 3", c)
	}
	// Other users, rules and windows count separately.
	if n := hit("u2", "messages", minute, time.Minute); n != 1 {
		t.Errorf("u2/messages = %d, want 1", n)
	}
	if n := hit("u1", "streams", minute, time.Minute); n != 1 {
		t.Errorf("u1/streams = %d, want 1", n)
	}
	// An hourly window starting at the same second is another counter.
	hour := minute.Truncate(time.Hour)
	if n := hit("u1", "messages", minute, time.Hour); n != 1 {
		t.Errorf("u1/messages hourly window at the minute's start = %d, want 1", n)
	}
	if n := hit("u1", "messages", hour, time.Hour); n != 1 {
		t.Errorf("u1/messages hourly = %d, want 1", n)
	}
	// The next window starts from zero; the previous one keeps its count.
	if n := hit("u1", "messages", minute.Add(time.Minute), time.Minute); n != 1 {
		t.Errorf("u1/messages next window = %d, want 1", n)
	}
	if n := hit("u1", "messages", minute, time.Minute); n != 4 {
		t.Errorf("u1/messages first window again = %d, want 4", n)
	}

	// The stored item: its count and its TTL attribute.
	var it struct {
		PK        string
		Hits      int64 `dynamo:"hits"`
		ExpiresAt int64 `dynamo:"expiresAt"`
	}
	key := "RL#u1#messages#60#" + "1775046600" // 2026-04-01T12:30:00Z
	if err := db.Table(db.RateLimits()).Get("PK", key).One(ctx, &it); err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if want := minute.Add(time.Minute + store.RateLimitTTLMargin).Unix(); it.Hits != 4 || it.ExpiresAt != want {
		t.Errorf("item = %+v, want hits 4, expiresAt %d", it, want)
	}
	if store.RateLimitsTable.TTLAttribute != "expiresAt" {
		t.Errorf("RateLimitsTable TTL attribute = %q", store.RateLimitsTable.TTLAttribute)
	}
}

// TestRateLimitsConcurrentHits: concurrent hits of one window each get a
// distinct count (the ADD is atomic).
func TestRateLimitsConcurrentHits(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rl := store.NewRateLimits(db.DB, db.RateLimits())
	start := time.Date(2026, 4, 1, 12, 30, 0, 0, time.UTC)
	const n = 20
	got := make(chan int64, n)
	for range n {
		go func() {
			c, err := rl.Hit(context.Background(), "u", "runs", start, time.Minute)
			if err != nil {
				t.Error(err)
			}
			got <- c
		}()
	}
	seen := map[int64]bool{}
	for range n {
		seen[<-got] = true
	}
	for i := int64(1); i <= n; i++ {
		if !seen[i] {
			t.Fatalf("counts %v: %d missing", seen, i)
		}
	}
}

// TestRateLimitsMissingTable: a storage failure is an error for the caller
// (the limiter decides to fail open), not a count.
func TestRateLimitsMissingTable(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	rl := store.NewRateLimits(db.DB, "no_such_table")
	n, err := rl.Hit(context.Background(), "u", "messages", time.Unix(0, 0), time.Minute)
	if err == nil || n != 0 || errs.KindOf(err) != errs.Internal {
		t.Fatalf("Hit on a missing table = %d, %v; want an internal error", n, err)
	}
}
