package toolloop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/toolloop"
	"github.com/workflowchat/service/shared/usage"
)

var now = time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)

var hashSpec = model.ToolSpec{Name: "hash", Description: "digest", InputSchema: json.RawMessage(`{"type":"object"}`)}

// fixture is the built-in model under a budgeted meter on real storage.
func fixture(t *testing.T) (*usage.Meter, *store.Usage, *model.Registry) {
	t.Helper()
	models, err := model.NewRegistry(model.Builtin{})
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.New(t)
	u := store.NewUsage(db.DB, db.Users())
	return usage.NewMeter(u, 100000, nil, func() time.Time { return now }), u, models
}

// held is what open reservations of userID hold: a reservation that
// cannot fit (2 tokens of a limit of 1) is refused with the counter as the
// store has it.
func held(t *testing.T, u *store.Usage, userID string) int64 {
	t.Helper()
	ok, c, err := u.Reserve(context.Background(), userID, usage.Month(now), 2, 1, now)
	if err != nil || ok {
		t.Fatal(ok, err)
	}
	return c.Committed - c.Spent
}

// TestPauseKeepsTheRestAndGivesBackTheReservation: a call that pauses
// stops the loop before it, with that call and the ones after it kept,
// and the reservation made for the first turn, never made, given back.
func TestPauseKeepsTheRestAndGivesBackTheReservation(t *testing.T) {
	t.Parallel()
	meter, u, models := fixture(t)
	ctx := context.Background()
	r, err := meter.Reserve(ctx, "u1", 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	calls := []model.ToolCall{{ID: "a", Name: "hash", Args: json.RawMessage(`{}`)}, {ID: "b", Name: "hash", Args: json.RawMessage(`{}`)}}
	var ran []string
	res, err := toolloop.Run(ctx, toolloop.Options{Meter: meter, Models: models, UserID: "u1", ModelID: model.BuiltinID, Tools: []model.ToolSpec{hashSpec}, MaxRounds: 3, Held: r,
		Delta: func(string) error { return nil },
		Call: func(_ context.Context, c model.ToolCall) (toolloop.CallOutcome, error) {
			ran = append(ran, c.ID)
			return toolloop.CallOutcome{Result: "{}", Pause: c.ID == "b"}, nil
		},
	}, toolloop.State{Content: "so far", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}, Calls: calls, Round: 1})
	if err != nil || res.Paused == nil || res.Turns != 0 || strings.Join(ran, ",") != "a,b" {
		t.Fatalf("Run = %+v, %v; ran %v", res, err, ran)
	}
	if p := res.Paused; len(p.Calls) != 1 || p.Calls[0].ID != "b" || p.Round != 1 || p.Content != "so far" || len(p.Messages) != 2 || p.Messages[1].ToolCallID != "a" {
		t.Errorf("paused state %+v", p)
	}
	if h := held(t, u, "u1"); h != 0 {
		t.Errorf("%d tokens still held after a loop that made no model turn", h)
	}
}

// TestLastRoundHasNoTools: after MaxRounds rounds of calls the turn is
// offered no tools, so the loop ends in text; every turn is metered.
func TestLastRoundHasNoTools(t *testing.T) {
	t.Parallel()
	meter, u, models := fixture(t)
	var calls int
	var text strings.Builder
	res, err := toolloop.Run(context.Background(), toolloop.Options{Meter: meter, Models: models, UserID: "u2", ModelID: model.BuiltinID, Tools: []model.ToolSpec{hashSpec}, MaxRounds: 1,
		Delta: func(d string) error { text.WriteString(d); return nil },
		Call: func(context.Context, model.ToolCall) (toolloop.CallOutcome, error) {
			calls++
			return toolloop.CallOutcome{Result: `{"digest":"d"}`}, nil
		},
	}, toolloop.State{Messages: []model.Message{{Role: model.RoleUser, Content: `run hash with {"text": "a"} then hash with {"text": "b"}`}}})
	if err != nil || calls != 1 || res.Turns != 2 || res.Content != text.String() || !strings.Contains(res.Content, "Running hash.\n\nThe hash tool returned") {
		t.Fatalf("Run = %+v, %v; %d calls", res, err, calls)
	}
	m, err := u.MonthUsage(context.Background(), "u2", usage.Month(now))
	if c := m[model.BuiltinID]; err != nil || c.Requests != 2 || c.Tokens() != int64(res.Usage.InputTokens+res.Usage.OutputTokens) || c.Tokens() == 0 {
		t.Errorf("usage %+v (%v), want two requests of the turns' usage %+v", m, err, res.Usage)
	}
	if h := held(t, u, "u2"); h != 0 {
		t.Errorf("%d tokens still held", h)
	}
}
