package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/usage"
)

// TestUsageSettlesAtomically: concurrent settles of the same counters all
// count (ADD, no read-modify-write), per model id of any spelling, per
// user and per month, the committed counter moving by each delta; one
// settle is one DynamoDB call.
func TestUsageSettlesAtomically(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	u := store.NewUsage(db.DB, db.Users())
	ctx := context.Background()
	const n = 16
	models := []string{"builtin", "anthropic.claude-3-5-sonnet-20240620-v1:0", "gpt-4o [eu].x"}
	var wg sync.WaitGroup
	errc := make(chan error, n*len(models))
	for i := range n {
		for _, m := range models {
			wg.Go(func() {
				errc <- u.Settle(ctx, "u1", "2026-06", m, int64(i)+2, usage.Counts{Requests: 1, InputTokens: int64(i), OutputTokens: 2})
			})
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := u.MonthUsage(ctx, "u1", "2026-06")
	if err != nil {
		t.Fatal(err)
	}
	want := usage.Counts{Requests: n, InputTokens: n * (n - 1) / 2, OutputTokens: 2 * n}
	if len(got) != len(models) {
		t.Fatalf("models = %v, want %v", got, models)
	}
	for _, m := range models {
		if got[m] != want {
			t.Errorf("%s = %+v, want %+v", m, got[m], want)
		}
	}
	if c, err := u.Committed(ctx, "u1", "2026-06"); err != nil || c != int64(len(models))*want.Tokens() {
		t.Errorf("committed = %d, %v; want %d", c, err, int64(len(models))*want.Tokens())
	}
	for _, other := range []struct{ user, month string }{{"u2", "2026-06"}, {"u1", "2026-07"}} {
		if got, err := u.MonthUsage(ctx, other.user, other.month); err != nil || len(got) != 0 {
			t.Errorf("%s %s = %v, %v; want empty", other.user, other.month, got, err)
		}
	}
	db.Counter.Reset()
	if err := u.Settle(ctx, "u1", "2026-06", "builtin", 1, usage.Counts{Requests: 1, InputTokens: 1}); err != nil {
		t.Fatal(err)
	}
	if c := db.Counter.Count(); c != 1 {
		t.Errorf("one settle made %d DynamoDB calls, want 1", c)
	}
}

// TestUsageReserve: a reservation is one conditional write that succeeds
// while the committed counter stays within the limit, and otherwise writes
// nothing and reports the counter as it found it, with no extra read.
func TestUsageReserve(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	u := store.NewUsage(db.DB, db.Users())
	ctx := context.Background()
	at := time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		name          string
		tokens, limit int64
		ok            bool
		committed     int64
	}{
		{"first of the month, over the limit", 101, 100, false, 0},
		{"first of the month", 60, 100, true, 60},
		{"would pass the limit", 41, 100, false, 60},
		{"exactly to the limit", 40, 100, true, 100},
		{"nothing left", 1, 100, false, 100},
		{"a larger limit", 5, 200, true, 105},
	}
	for _, s := range steps {
		db.Counter.Reset()
		ok, c, err := u.Reserve(ctx, "u1", "2026-06", s.tokens, s.limit, at)
		if err != nil || ok != s.ok || c.Committed != s.committed || c.Spent != 0 {
			t.Errorf("%s: Reserve(%d, %d) = %v, %+v, %v; want %v, %d, nothing spent", s.name, s.tokens, s.limit, ok, c, err, s.ok, s.committed)
		}
		if n := db.Counter.Count(); n != 1 {
			t.Errorf("%s: %d DynamoDB calls, want 1", s.name, n)
		}
	}
	// Settling gives back what the call did not spend; the per-model
	// counters get the real count.
	if err := u.Settle(ctx, "u1", "2026-06", "builtin", 30-60, usage.Counts{Requests: 1, InputTokens: 20, OutputTokens: 10}); err != nil {
		t.Fatal(err)
	}
	if c, _ := u.Committed(ctx, "u1", "2026-06"); c != 75 {
		t.Errorf("committed after a settle = %d, want 75", c)
	}
	// A refused reservation tells what settled calls spent (30) apart
	// from what open ones hold (45).
	// A refused reservation tells when the last one was made.
	if ok, c, err := u.Reserve(ctx, "u1", "2026-06", 200, 200, at.Add(time.Hour)); err != nil || ok || c.Committed != 75 || c.Spent != 30 || !c.ReservedAt.Equal(at) {
		t.Errorf("Reserve(200, 200) = %v, %+v, %v; want refused at 75 committed, 30 spent, reserved at %s", ok, c, err, at)
	}
	if got, _ := u.MonthUsage(ctx, "u1", "2026-06"); got["builtin"] != (usage.Counts{Requests: 1, InputTokens: 20, OutputTokens: 10}) {
		t.Errorf("usage = %+v", got)
	}
}

// TestUsageReserveStartsOldItems: a month item written before the
// committed counter existed gets it from its models' tokens at its first
// reservation, which then holds to the limit.
func TestUsageReserveStartsOldItems(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	u := store.NewUsage(db.DB, db.Users())
	ctx := context.Background()
	// 70 + 20 tokens of two models, as the earlier version stored them.
	_, err := db.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(db.Users()), Item: map[string]types.AttributeValue{
		"PK":                     &types.AttributeValueMemberS{Value: "USAGE#u1#2026-06"},
		"req_6275696c74696e":     &types.AttributeValueMemberN{Value: "2"},
		"in_6275696c74696e":      &types.AttributeValueMemberN{Value: "50"},
		"out_6275696c74696e":     &types.AttributeValueMemberN{Value: "20"},
		"in_" + hexOf("gpt-4o"):  &types.AttributeValueMemberN{Value: "15"},
		"out_" + hexOf("gpt-4o"): &types.AttributeValueMemberN{Value: "5"},
		"req_" + hexOf("gpt-4o"): &types.AttributeValueMemberN{Value: "1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)
	if ok, c, err := u.Reserve(ctx, "u1", "2026-06", 20, 100, at); err != nil || ok || c.Committed != 90 || c.Spent != 90 || !c.ReservedAt.IsZero() {
		t.Errorf("Reserve(20, 100) on 90 spent = %v, %+v, %v; want refused at 90, never reserved", ok, c, err)
	}
	if ok, c, err := u.Reserve(ctx, "u1", "2026-06", 10, 100, at); err != nil || !ok || c.Committed != 100 {
		t.Errorf("Reserve(10, 100) on 90 spent = %v, %+v, %v; want 100", ok, c, err)
	}
}

func hexOf(s string) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, digits[s[i]>>4], digits[s[i]&15])
	}
	return string(out)
}

// TestConcurrentReservations: 16 calls reserve at once against a small
// budget, each its prompt plus an output cap lowered to what remains, then
// settle to a real count at most what they held: the committed tokens,
// and the usage, never pass the budget; the calls refused had no room.
func TestConcurrentReservations(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	u := store.NewUsage(db.DB, db.Users())
	// Three calls hold 320 tokens each; the fourth gets what remains, 140:
	// its prompt and an output cap lowered to 20.
	const budget = 1100
	now := time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)
	m := usage.NewMeter(u, budget, nil, func() time.Time { return now })
	ctx := context.Background()
	const n, prompt = 16, 120
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		made     int
		refused  int
		failures []error
	)
	for range n {
		wg.Go(func() {
			r, err := m.Reserve(ctx, "u1", prompt, 200)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made++
				// The call spends its prompt and all the output it may.
				failures = append(failures, m.Settle(ctx, r, "builtin", usage.Counts{Requests: 1, InputTokens: prompt, OutputTokens: int64(r.MaxOutput())}))
			case errs.CodeOf(err) == usage.CodeBudgetExceeded:
				refused++
			default:
				failures = append(failures, err)
			}
		})
	}
	wg.Wait()
	for _, err := range failures {
		if err != nil {
			t.Fatal(err)
		}
	}
	month := usage.Month(now)
	got, err := u.MonthUsage(ctx, "u1", month)
	if err != nil {
		t.Fatal(err)
	}
	spent := got["builtin"].Tokens()
	if spent > budget*11/10 || spent != budget {
		t.Errorf("spent %d tokens of a budget of %d, want all of it and no more", spent, budget)
	}
	if made != 4 || refused != n-4 || got["builtin"].Requests != int64(made) {
		t.Errorf("%d calls made, %d refused, %d recorded", made, refused, got["builtin"].Requests)
	}
	if c, _ := u.Committed(ctx, "u1", month); c != spent {
		t.Errorf("committed %d after every settle, spent %d", c, spent)
	}
	t.Logf("%d of %d calls made, %d tokens of %d", made, n, spent, budget)
}
