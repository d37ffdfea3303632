package usage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/usage"
)

var now = time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)

// countingModels is the model registry, counting the calls that reach it
// and keeping the last request.
type countingModels struct {
	*model.Registry
	calls int
	last  model.Request
}

func (c *countingModels) Generate(ctx context.Context, req model.Request, emit func(model.Chunk) error) (model.Result, error) {
	c.calls++
	c.last = req
	return c.Registry.Generate(ctx, req, emit)
}

// TestMeterGenerate: a model call under each budget state, on the
// built-in model (whose input count the estimate matches) and real
// storage: the DynamoDB calls it costs, the cap the model gets, whether
// it is made, and that what it spent is recorded and never passes the
// budget.
func TestMeterGenerate(t *testing.T) {
	t.Parallel()
	const budget = 100
	prompt := "count to 20 slowly"
	req := model.Request{ModelID: model.BuiltinID, System: "one two", Messages: []model.Message{{Role: model.RoleUser, Content: prompt}}}
	in := int64(2 + len(strings.Fields(prompt))) // 6
	tests := []struct {
		name      string
		budget    int64
		spent     int64 // before the call
		ddbCalls  int64
		made      bool
		wantCap   int
		wantOut   int64
		wantError string
	}{
		{"no budget: no reservation, the settle only", 0, 0, 1, true, 0, 20, ""},
		{"room for the whole cap: one reservation, one settle", 10000, 0, 2, true, usage.DefaultMaxOutput, 20, ""},
		{"the cap lowered to what remains: two reservation writes", budget, budget - in - 10, 3, true, 10, 10, ""},
		{"the prompt does not fit: refused, nothing written", budget, budget - in, 1, false, 0, 0, usage.CodeBudgetExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := storetest.New(t)
			u := store.NewUsage(db.DB, db.Users())
			reg, err := model.NewRegistry(model.Builtin{})
			if err != nil {
				t.Fatal(err)
			}
			models := &countingModels{Registry: reg}
			m := usage.NewMeter(u, tt.budget, nil, func() time.Time { return now })
			ctx := context.Background()
			if tt.spent > 0 {
				if err := u.Settle(ctx, "u1", usage.Month(now), "earlier", tt.spent, usage.Counts{Requests: 1, InputTokens: tt.spent}); err != nil {
					t.Fatal(err)
				}
			}
			db.Counter.Reset()
			res, err := m.Generate(ctx, models, "u1", req, nil, func(model.Chunk) error { return nil })
			if errs.CodeOf(err) != tt.wantError && !(tt.wantError == "" && err == nil) {
				t.Fatalf("Generate: %v, want %q", err, tt.wantError)
			}
			if n := db.Counter.Count(); n != tt.ddbCalls {
				t.Errorf("%d DynamoDB calls, want %d", n, tt.ddbCalls)
			}
			if (models.calls == 1) != tt.made {
				t.Fatalf("model called %d times, want made %v", models.calls, tt.made)
			}
			if tt.made && (models.last.MaxTokens != tt.wantCap || int64(res.Usage.OutputTokens) != tt.wantOut || int64(res.Usage.InputTokens) != in) {
				t.Errorf("cap %d, usage %+v; want cap %d, %d in, %d out", models.last.MaxTokens, res.Usage, tt.wantCap, in, tt.wantOut)
			}
			got, err := u.MonthUsage(ctx, "u1", usage.Month(now))
			if err != nil {
				t.Fatal(err)
			}
			if want := (usage.Counts{Requests: 1, InputTokens: in, OutputTokens: tt.wantOut}); tt.made && got[model.BuiltinID] != want {
				t.Errorf("recorded %+v, want %+v", got[model.BuiltinID], want)
			}
			committed, _ := u.Committed(ctx, "u1", usage.Month(now))
			if committed != tt.spent+got[model.BuiltinID].Tokens() {
				t.Errorf("committed %d, want %d spent and %d of this call", committed, tt.spent, got[model.BuiltinID].Tokens())
			}
			if tt.budget > 0 && committed > tt.budget {
				t.Errorf("committed %d passes the budget %d", committed, tt.budget)
			}
		})
	}
}

// TestMeterHeldReservation: a call given a reservation made beforehand
// uses it (no second reservation) and settles it; a reservation given
// back restores the budget; a nil Meter lets every call through and
// records nothing.
func TestMeterHeldReservation(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	u := store.NewUsage(db.DB, db.Users())
	reg, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		t.Fatal(err)
	}
	m := usage.NewMeter(u, 10000, nil, func() time.Time { return now })
	ctx := context.Background()
	req := model.Request{ModelID: model.BuiltinID, Messages: []model.Message{{Role: model.RoleUser, Content: "hello there"}}}
	held, err := m.ReserveCall(ctx, reg, "u1", req)
	if err != nil || held.Held() != int64(2+usage.DefaultMaxOutput) || held.MaxOutput() != usage.DefaultMaxOutput {
		t.Fatalf("ReserveCall = %+v (held %d), %v", held, held.Held(), err)
	}
	db.Counter.Reset()
	if _, err := m.Generate(ctx, reg, "u1", req, held, func(model.Chunk) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n := db.Counter.Count(); n != 1 {
		t.Errorf("%d DynamoDB calls with a held reservation, want 1 (the settle)", n)
	}
	m.Release(ctx, held) // already settled: nothing happens
	spent, _ := u.Committed(ctx, "u1", usage.Month(now))
	got, _ := u.MonthUsage(ctx, "u1", usage.Month(now))
	if spent != got[model.BuiltinID].Tokens() || got[model.BuiltinID].Requests != 1 {
		t.Errorf("committed %d, usage %+v", spent, got)
	}

	r, err := m.Reserve(ctx, "u1", 10, 50)
	if err != nil {
		t.Fatal(err)
	}
	m.Release(ctx, r)
	if c, _ := u.Committed(ctx, "u1", usage.Month(now)); c != spent {
		t.Errorf("committed %d after a release, want %d", c, spent)
	}

	var none *usage.Meter
	res, err := none.Generate(ctx, reg, "u1", req, nil, func(model.Chunk) error { return nil })
	if err != nil || res.Usage.OutputTokens == 0 {
		t.Errorf("nil meter: %+v, %v", res, err)
	}
	if none.Budgeted() {
		t.Error("a nil meter has a budget")
	}
	if got2, _ := u.MonthUsage(ctx, "u1", usage.Month(now)); fmt.Sprint(got2) != fmt.Sprint(got) {
		t.Errorf("a nil meter recorded %v", got2)
	}
}

// TestReserveWhileOthersHoldTheBudget: a reservation that does not fit
// while another call's reservation is open waits for it: it runs once
// that one settles, and is refused RateLimited BUDGET_BUSY (a short
// Retry-After) when it has not settled by the wait bound. BUDGET_EXCEEDED
// is only for a call that what settled calls spent leaves no room for,
// however much open reservations hold.
func TestReserveWhileOthersHoldTheBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const budget = 2000
	setup := func(t *testing.T, wait time.Duration) (*usage.Meter, *store.Usage) {
		db := storetest.New(t)
		u := store.NewUsage(db.DB, db.Users())
		return usage.NewMeter(u, budget, nil, func() time.Time { return now }).WithWait(wait), u
	}

	t.Run("waits for an open reservation to settle", func(t *testing.T) {
		t.Parallel()
		m, _ := setup(t, time.Minute) // the settle below comes long before
		first, err := m.Reserve(ctx, "u1", 20, 0)
		if err != nil || first.Held() != budget {
			t.Fatalf("first = held %d, %v; want the whole budget", first.Held(), err)
		}
		done := make(chan error, 1)
		var second *usage.Reservation
		go func() {
			var err error
			second, err = m.Reserve(ctx, "u1", 20, 100)
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("the second reservation did not wait: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if err := m.Settle(ctx, first, "builtin", usage.Counts{Requests: 1, InputTokens: 20, OutputTokens: 25}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil || second.Held() != 120 {
			t.Fatalf("second after the settle = held %d, %v; want 120", second.Held(), err)
		}
	})

	t.Run("busy at the wait bound", func(t *testing.T) {
		t.Parallel()
		m, _ := setup(t, 0)
		if _, err := m.Reserve(ctx, "u1", 20, 0); err != nil {
			t.Fatal(err)
		}
		_, err := m.Reserve(ctx, "u1", 20, 0)
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.RateLimited || e.Code != usage.CodeBudgetBusy || e.RetryAfter != usage.BusyRetryAfter {
			t.Fatalf("Reserve = %v, want RateLimited BUDGET_BUSY", err)
		}
	})

	t.Run("the context ends the wait", func(t *testing.T) {
		t.Parallel()
		m, _ := setup(t, time.Hour)
		if _, err := m.Reserve(ctx, "u1", 20, 0); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(20*time.Millisecond, cancel)
		if _, err := m.Reserve(cctx, "u1", 20, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("Reserve = %v, want the context's error", err)
		}
	})

	t.Run("exceeded when what was spent leaves no room", func(t *testing.T) {
		t.Parallel()
		m, u := setup(t, time.Hour) // an answer must not wait
		if err := u.Settle(ctx, "u1", usage.Month(now), "earlier", budget-30, usage.Counts{Requests: 1, InputTokens: budget - 30}); err != nil {
			t.Fatal(err)
		}
		open, err := m.Reserve(ctx, "u1", 10, 0) // holds the last 30
		if err != nil || open.Held() != 30 {
			t.Fatalf("open = held %d, %v", open.Held(), err)
		}
		if _, err := m.Reserve(ctx, "u1", 30, 0); errs.CodeOf(err) != usage.CodeBudgetExceeded {
			t.Errorf("a prompt of 30 with 30 unspent: %v, want BUDGET_EXCEEDED", err)
		}
		// 29 fits once the open one settles: busy (not waiting here)...
		now0 := usage.NewMeter(u, budget, nil, func() time.Time { return now }).WithWait(0)
		if _, err := now0.Reserve(ctx, "u1", 29, 0); errs.CodeOf(err) != usage.CodeBudgetBusy {
			t.Errorf("a prompt of 29 with 30 unspent: %v, want BUDGET_BUSY", err)
		}
		// ... until no call has reserved for StaleReservation: what is
		// still held was lost, and counts as spent.
		later := usage.NewMeter(u, budget, nil, func() time.Time { return now.Add(usage.StaleReservation + time.Second) }).WithWait(time.Hour)
		if _, err := later.Reserve(ctx, "u1", 29, 0); errs.CodeOf(err) != usage.CodeBudgetExceeded {
			t.Errorf("a prompt of 29 with 30 held for longer than any call: %v, want BUDGET_EXCEEDED", err)
		}
	})
}
