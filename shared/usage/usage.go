// Package usage meters the tokens every model call spends, per user, month
// and model, and holds each user to the monthly token budget by
// reservation.
//
// Before a model call its estimate is reserved (Reserve): the prompt's
// tokens plus the output cap, the cap lowered to what the budget has left,
// added to the user's month counter of committed tokens by one conditional
// write that fails when the counter would pass the budget. A call whose
// prompt alone does not fit is not made: when other calls under way hold
// the room and will give back what they do not spend, it waits for them
// (bounded) and is then refused RateLimited BUDGET_BUSY (retry shortly);
// when what settled calls spent leaves no room, RateLimited
// BUDGET_EXCEEDED.
// After the call the reservation is settled (Settle): one write moves the
// committed counter by the real count minus the reservation and adds the
// real count to the model's counters. Calls that start together each hold
// their own share, so whatever the concurrency the committed tokens never
// pass the budget; the real count passes it only by what the prompt
// estimate missed (nothing for the built-in model, whose count is exact).
// Without a budget nothing is reserved and a call costs its settle write
// only.
package usage

import (
	"context"
	"math/rand/v2"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/model"
)

// CodeBudgetExceeded is the code of a model call refused because the
// user's monthly token budget has no room for it.
const CodeBudgetExceeded = "BUDGET_EXCEEDED"

// DefaultMaxOutput is the output cap a reservation holds for a call that
// sets none (when the budget has room for it).
const DefaultMaxOutput = 4096

// CodeBudgetBusy is the code of a model call refused because, although
// the user's monthly token budget can fit it, other calls under way still
// held the room it needs when the Meter stopped waiting for them: a retry
// after RetryAfter seconds may succeed.
const CodeBudgetBusy = "BUDGET_BUSY"

// maxReserveAttempts bounds the conditional writes of one Reserve that
// lower the output cap in a row: each refused write reads the counter
// back, and a later one asks for what remains.
const maxReserveAttempts = 8

// DefaultBudgetWait bounds how long Reserve waits for other reservations
// of the user to settle before it answers BUDGET_BUSY.
const DefaultBudgetWait = 5 * time.Second

// StaleReservation is how long after the user's last reservation the
// tokens still held count as spent rather than as coming back: longer
// than any model call holds a reservation (a Lambda invocation lasts at
// most 15 minutes). Until then a call they keep out is BUDGET_BUSY, after
// it BUDGET_EXCEEDED.
const StaleReservation = 20 * time.Minute

// BusyRetryAfter is the Retry-After, in seconds, of BUDGET_BUSY.
const BusyRetryAfter = 2

// The backoff between the polls of a waiting Reserve (with jitter: half
// to all of it).
const (
	minBusyBackoff = 20 * time.Millisecond
	maxBusyBackoff = 400 * time.Millisecond
)

// settleTimeout bounds a settle write, made with a context detached from
// the caller's (a reply stopped by its client still counts).
const settleTimeout = 10 * time.Second

// Counts are a month's counters of one model.
type Counts struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// Tokens is the sum of input and output tokens.
func (c Counts) Tokens() int64 { return c.InputTokens + c.OutputTokens }

// Add returns c plus d.
func (c Counts) Add(d Counts) Counts {
	return Counts{Requests: c.Requests + d.Requests, InputTokens: c.InputTokens + d.InputTokens, OutputTokens: c.OutputTokens + d.OutputTokens}
}

// Store keeps the counters: per user and month, a committed counter (the
// tokens reserved or spent) and per model its requests, input and output
// tokens.
type Store interface {
	// Reserve adds tokens to userID's committed counter of month when the
	// counter, tokens added, stays at most limit, and records at as the
	// time of the last reservation, in one conditional write: ok and the
	// counter after (Counter.Committed). Otherwise it writes nothing and
	// returns ok false and the counter as the refused write found it.
	Reserve(ctx context.Context, userID, month string, tokens, limit int64, at time.Time) (ok bool, c Counter, err error)
	// Settle adds delta (negative to give back) to userID's committed
	// counter of month and c to modelID's counters (none when modelID is
	// empty), atomically in one write.
	Settle(ctx context.Context, userID, month, modelID string, delta int64, c Counts) error
	// SettleReservation is Settle for a call whose reservation wrote the
	// month's counter: it writes only when the counter is still there (an
	// erased account's is not) and succeeds without a write otherwise.
	SettleReservation(ctx context.Context, userID, month, modelID string, delta int64, c Counts) error
	// MonthUsage returns every model's counters of a month (an empty map
	// when there are none).
	MonthUsage(ctx context.Context, userID, month string) (map[string]Counts, error)
}

// Counter is a user's month counter as a reservation found it.
type Counter struct {
	// Committed is what open reservations hold plus what settled calls
	// spent.
	Committed int64
	// Spent is what settled calls spent (the sum of the models'
	// counters): Committed minus Spent is what open reservations hold.
	Spent int64
	// ReservedAt is when the last reservation was made (zero when none
	// was recorded).
	ReservedAt time.Time
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// Month returns the usage month of t: its UTC YYYY-MM.
func Month(t time.Time) string { return t.UTC().Format("2006-01") }

// Meter records usage and holds the budget. A nil *Meter records nothing
// and allows everything.
type Meter struct {
	store  Store
	budget int64
	prices map[string]Price
	now    func() time.Time
	wait   time.Duration
}

// NewMeter returns a Meter over store. budget is the monthly token budget
// per user (0: none); prices the per-model prices (a model missing costs
// 0); now nil means time.Now.
func NewMeter(store Store, budget int64, prices map[string]Price, now func() time.Time) *Meter {
	if now == nil {
		now = time.Now
	}
	return &Meter{store: store, budget: budget, prices: prices, now: now, wait: DefaultBudgetWait}
}

// WithWait sets how long Reserve waits for other reservations to settle
// (DefaultBudgetWait by default; 0 answers BUDGET_BUSY at once) and
// returns m.
func (m *Meter) WithWait(d time.Duration) *Meter {
	m.wait = max(d, 0)
	return m
}

// Budgeted reports whether m holds users to a budget (it reserves).
func (m *Meter) Budgeted() bool { return m != nil && m.budget > 0 }

// Reservation is the budget held for one model call of a user, from
// Reserve to Settle. Its methods are safe on nil (no meter).
type Reservation struct {
	userID, month string
	held          int64
	maxOutput     int
	settled       bool
}

// MaxOutput is the output cap the call must send the model
// (model.Request.MaxTokens): what the reservation holds for the output;
// without a budget the cap the caller asked for (0: the provider's
// default).
func (r *Reservation) MaxOutput() int {
	if r == nil {
		return 0
	}
	return r.maxOutput
}

// Held is the number of tokens the reservation holds (0 without a budget).
func (r *Reservation) Held() int64 {
	if r == nil {
		return 0
	}
	return r.held
}

// Reserve holds userID's budget for one model call whose prompt costs
// prompt tokens (an estimate: model.Registry.EstimateInput) and whose
// output may take maxOutput tokens (0: DefaultMaxOutput): prompt plus the
// output cap, the cap lowered to what remains of this month's budget,
// with one conditional write (two when the cap must be lowered, more only
// when concurrent calls move the counter meanwhile). When the prompt does
// not fit in what remains but would once other open reservations of the
// user settle (their calls are under way and usually spend far less than
// they hold), it waits for them, polling the counter with a growing
// backoff, up to the Meter's wait bound (DefaultBudgetWait). Errors:
// RateLimited BUDGET_EXCEEDED (with RetryAfter, the seconds to next
// month) when the prompt and one output token do not fit in what settled
// calls left, so that no reservation coming back can make room (tokens
// held while no call has reserved for StaleReservation count as spent);
// RateLimited BUDGET_BUSY (RetryAfter BusyRetryAfter) when they would fit
// but open reservations still held the room at the wait bound; the
// context's error when it ends while waiting; the store's errors. Without
// a budget it writes nothing and the reservation holds nothing.
func (m *Meter) Reserve(ctx context.Context, userID string, prompt, maxOutput int) (*Reservation, error) {
	const op = "usage.Reserve"
	if m == nil {
		return nil, nil
	}
	r := &Reservation{userID: userID, month: Month(m.now()), maxOutput: maxOutput}
	if m.budget <= 0 {
		return r, nil
	}
	if maxOutput <= 0 {
		maxOutput = DefaultMaxOutput
	}
	want := int64(maxOutput)
	out, lowered := want, 0
	deadline := time.Now().Add(m.wait)
	backoff := minBusyBackoff
	for {
		tokens := int64(prompt) + out
		ok, c, err := m.store.Reserve(ctx, userID, r.month, tokens, m.budget, m.now())
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		if ok {
			r.held, r.maxOutput = tokens, int(out)
			return r, nil
		}
		committed, spent := c.Committed, c.Spent
		if spent < committed && !c.ReservedAt.IsZero() && m.now().Sub(c.ReservedAt) > StaleReservation {
			// No call has reserved for longer than any call holds a
			// reservation: what is held was lost (a process that died
			// before settling, a call whose fate is unknown) and stays.
			spent = committed
		}
		if int64(prompt) >= m.budget-spent {
			return nil, m.exceeded(op, max(m.budget-committed, 0))
		}
		if remaining := m.budget - committed; int64(prompt) < remaining && lowered < maxReserveAttempts {
			out, lowered = min(out, remaining-int64(prompt)), lowered+1
			continue
		}
		// Open reservations hold the room this call needs; they give
		// back what their calls do not spend when they settle.
		wait := min(backoff, time.Until(deadline))
		if wait <= 0 {
			e := errs.E(op, errs.RateLimited, CodeBudgetBusy,
				"other model calls under way hold the rest of the monthly token budget until they finish; try again shortly")
			e.RetryAfter = BusyRetryAfter
			return nil, e
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errs.Wrap(op, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, maxBusyBackoff)
		out, lowered = want, 0
	}
}

// exceeded is the BUDGET_EXCEEDED error, retry after the month's end.
func (m *Meter) exceeded(op string, remaining int64) error {
	msg := "the monthly token budget is spent; it renews on the first day of next month (UTC)"
	if remaining > 0 {
		msg = "the monthly token budget has no room for this request; it renews on the first day of next month (UTC)"
	}
	e := errs.E(op, errs.RateLimited, CodeBudgetExceeded, msg)
	now := m.now().UTC()
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	e.RetryAfter = max(int(next.Sub(now).Seconds()), 1)
	return e
}

// Settle ends reservation r with the usage of its call: one write that
// moves the committed counter by used's tokens minus what r held and adds
// used to modelID's counters, in r's month (modelID empty, used zero:
// the call was not made and r is given back, with no write when r held
// nothing). It runs detached from ctx's cancellation (a reply its client
// stopped still counts). A second Settle of r does nothing. It fails with
// the store's errors, leaving the reservation counted.
func (m *Meter) Settle(ctx context.Context, r *Reservation, modelID string, used Counts) error {
	if m == nil || r == nil || r.settled {
		return nil
	}
	r.settled = true
	if modelID == "" {
		used = Counts{}
	}
	if r.held == 0 && used == (Counts{}) {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if r.held > 0 {
		// The reservation wrote the month's counter: a settle never
		// writes it back once the account's erasure removed it.
		return errs.Wrap("usage.Settle", m.store.SettleReservation(sctx, r.userID, r.month, modelID, used.Tokens()-r.held, used))
	}
	return errs.Wrap("usage.Settle", m.store.Settle(sctx, r.userID, r.month, modelID, used.Tokens()-r.held, used))
}

// Record adds the usage of a model call that reserved nothing (a call
// made without a budget, or one whose tool did not declare it calls a
// model) to userID's usage of this month: one write. It fails with the
// store's errors.
func (m *Meter) Record(ctx context.Context, userID, modelID string, used Counts) error {
	if m == nil {
		return nil
	}
	return m.Settle(ctx, &Reservation{userID: userID, month: Month(m.now())}, modelID, used)
}

// Release gives back reservation r whose call was not made (Settle with
// no usage). A failure is logged: the reservation stays counted.
func (m *Meter) Release(ctx context.Context, r *Reservation) {
	if err := m.Settle(ctx, r, "", Counts{}); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "release a budget reservation", "err", err.Error())
	}
}

// Models are the models a Meter meters calls of (model.Registry).
type Models interface {
	Generate(ctx context.Context, req model.Request, emit func(model.Chunk) error) (model.Result, error)
	EstimateInput(req model.Request) int
}

// ReserveCall reserves userID's budget for the model call req: its input
// estimate (Models.EstimateInput) and its output cap (req.MaxTokens, 0:
// DefaultMaxOutput). Its errors are Reserve's.
func (m *Meter) ReserveCall(ctx context.Context, models Models, userID string, req model.Request) (*Reservation, error) {
	if !m.Budgeted() {
		return m.Reserve(ctx, userID, 0, req.MaxTokens)
	}
	return m.Reserve(ctx, userID, models.EstimateInput(req), req.MaxTokens)
}

// Generate makes the model call req for userID under the budget: it
// reserves (ReserveCall) unless held, a reservation made for this call
// beforehand (e.g. to refuse before a stream starts), is given; sends the
// reservation's output cap as req.MaxTokens; and settles to the usage the
// provider reported, also when the call failed. Errors: Reserve's (the
// model is not called), then the model's. A failed settle is logged.
func (m *Meter) Generate(ctx context.Context, models Models, userID string, req model.Request, held *Reservation, emit func(model.Chunk) error) (model.Result, error) {
	r := held
	if r == nil {
		var err error
		if r, err = m.ReserveCall(ctx, models, userID, req); err != nil {
			return model.Result{}, err
		}
	}
	if c := r.MaxOutput(); c > 0 {
		req.MaxTokens = c
	}
	res, err := models.Generate(ctx, req, emit)
	used := Counts{Requests: 1, InputTokens: int64(res.Usage.InputTokens), OutputTokens: int64(res.Usage.OutputTokens)}
	if serr := m.Settle(ctx, r, req.ModelID, used); serr != nil {
		logging.FromContext(ctx).WarnContext(ctx, "settle a model call's usage", "modelId", req.ModelID, "err", serr.Error())
	}
	return res, err
}

// ModelUsage is one model's line of a Report.
type ModelUsage struct {
	ModelID      string  `json:"modelId"`
	Requests     int64   `json:"requests"`
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUsd"`
}

// Total sums a Report's lines.
type Total struct {
	Requests     int64   `json:"requests"`
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUsd"`
}

// Budget is a Report's budget: LimitTokens and RemainingTokens are null
// when there is no budget.
type Budget struct {
	LimitTokens     *int64 `json:"limitTokens"`
	UsedTokens      int64  `json:"usedTokens"`
	RemainingTokens *int64 `json:"remainingTokens"`
}

// Report is a user's usage of one month.
type Report struct {
	Month  string       `json:"month"`
	Models []ModelUsage `json:"models"`
	Total  Total        `json:"total"`
	Budget Budget       `json:"budget"`
}

// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package.
var monthPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])$`) })

// Report returns userID's usage of month (YYYY-MM; empty: this UTC month),
// models sorted by id. Errors: Invalid INVALID_MONTH, Forbidden unless
// userID is the signed-in user, the store's errors.
func (m *Meter) Report(ctx context.Context, userID, month string) (Report, error) {
	const op = "usage.Report"
	if month == "" {
		month = Month(m.now())
	}
	if !monthPattern().MatchString(month) {
		e := errs.E(op, errs.Invalid, "INVALID_MONTH", "month must be YYYY-MM")
		e.Details = []errs.FieldError{{Field: "month", Message: "must be a month like 2026-01"}}
		return Report{}, e
	}
	if err := auth.Authorize(ctx, op, userID); err != nil {
		return Report{}, err
	}
	counts, err := m.store.MonthUsage(ctx, userID, month)
	if err != nil {
		return Report{}, errs.Wrap(op, err)
	}
	r := Report{Month: month, Models: []ModelUsage{}}
	for id, c := range counts {
		p := m.prices[id]
		cost := (float64(c.InputTokens)*p.Input + float64(c.OutputTokens)*p.Output) / 1e6
		r.Models = append(r.Models, ModelUsage{ModelID: id, Requests: c.Requests, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CostUSD: cost})
		r.Total.Requests += c.Requests
		r.Total.InputTokens += c.InputTokens
		r.Total.OutputTokens += c.OutputTokens
		r.Total.CostUSD += cost
	}
	slices.SortFunc(r.Models, func(a, b ModelUsage) int {
		switch {
		case a.ModelID < b.ModelID:
			return -1
		case a.ModelID > b.ModelID:
			return 1
		}
		return 0
	})
	r.Budget.UsedTokens = r.Total.InputTokens + r.Total.OutputTokens
	if m.budget > 0 {
		limit, remaining := m.budget, max(m.budget-r.Budget.UsedTokens, 0)
		r.Budget.LimitTokens, r.Budget.RemainingTokens = &limit, &remaining
	}
	return r, nil
}
