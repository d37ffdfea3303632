// Package usage meters the tokens every model call spends, per user, month
// and model, and enforces the monthly token budget.
//
// Each call adds to the counters with one atomic update (an ADD, never a
// read-modify-write). The budget is checked with one read before each model
// call; calls that start concurrently all pass the same check, so a user
// can overshoot the budget by at most one call each.
package usage

import (
	"context"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
)

// CodeBudgetExceeded is the code of a model call refused because the user
// spent the monthly token budget.
const CodeBudgetExceeded = "BUDGET_EXCEEDED"

// Counts are a month's counters of one model.
type Counts struct {
	Requests     int64
	InputTokens  int64
	OutputTokens int64
}

// Tokens is the sum of input and output tokens.
func (c Counts) Tokens() int64 { return c.InputTokens + c.OutputTokens }

// Add returns c plus d.
func (c Counts) Add(d Counts) Counts {
	return Counts{Requests: c.Requests + d.Requests, InputTokens: c.InputTokens + d.InputTokens, OutputTokens: c.OutputTokens + d.OutputTokens}
}

// Store keeps the counters. AddUsage adds c atomically to userID's counters
// of modelID in month; MonthUsage returns every model's counters of a month
// (an empty map when there are none).
type Store interface {
	AddUsage(ctx context.Context, userID, month, modelID string, c Counts) error
	MonthUsage(ctx context.Context, userID, month string) (map[string]Counts, error)
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// Month returns the usage month of t: its UTC YYYY-MM.
func Month(t time.Time) string { return t.UTC().Format("2006-01") }

// Meter records usage and checks budgets. A nil *Meter records nothing and
// allows everything.
type Meter struct {
	store  Store
	budget int64
	prices map[string]Price
	now    func() time.Time
}

// NewMeter returns a Meter over store. budget is the monthly token budget
// per user (0: none); prices the per-model prices (a model missing costs
// 0); now nil means time.Now.
func NewMeter(store Store, budget int64, prices map[string]Price, now func() time.Time) *Meter {
	if now == nil {
		now = time.Now
	}
	return &Meter{store: store, budget: budget, prices: prices, now: now}
}

// Check fails with RateLimited BUDGET_EXCEEDED when userID has spent this
// month's budget, counting pending tokens not yet recorded (those of the
// reply being generated); it fails with the store's error when the counters cannot
// be read. It does nothing without a budget.
func (m *Meter) Check(ctx context.Context, userID string, pending int64) error {
	if m == nil || m.budget <= 0 {
		return nil
	}
	const op = "usage.Check"
	counts, err := m.store.MonthUsage(ctx, userID, Month(m.now()))
	if err != nil {
		return errs.Wrap(op, err)
	}
	used := pending
	for _, c := range counts {
		used += c.Tokens()
	}
	if used >= m.budget {
		e := errs.E(op, errs.RateLimited, CodeBudgetExceeded, "the monthly token budget is spent; it renews on the first day of next month (UTC)")
		now := m.now().UTC()
		next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		e.RetryAfter = max(int(next.Sub(now).Seconds()), 1)
		return e
	}
	return nil
}

// Record adds one request of modelID with its tokens to userID's usage of
// this month. It fails with the store's error.
func (m *Meter) Record(ctx context.Context, userID, modelID string, inputTokens, outputTokens int) error {
	if m == nil || userID == "" || modelID == "" {
		return nil
	}
	return errs.Wrap("usage.Record", m.store.AddUsage(ctx, userID, Month(m.now()), modelID,
		Counts{Requests: 1, InputTokens: int64(inputTokens), OutputTokens: int64(outputTokens)}))
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

// ModelTools are the tools that call a model (the tool server's
// llm_generate). The budget is checked before each of their calls; their
// tokens are not metered (the tool server does not report them).
var ModelTools = []string{"llm_generate"}

// CallsModel reports whether tool toolID calls a model.
func CallsModel(toolID string) bool { return slices.Contains(ModelTools, toolID) }

// Runner runs tools (toolclient.Catalog; the workflow engine's ToolRunner).
type Runner interface {
	Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error)
}

// Guard returns r checking the signed-in user's budget before each call
// of a tool that calls a model: over budget, the call fails with
// RateLimited BUDGET_EXCEEDED (its message starts with the code, as a
// workflow step keeps only the message) without running.
func (m *Meter) Guard(r Runner) Runner { return guard{m: m, r: r} }

type guard struct {
	m *Meter
	r Runner
}

func (g guard) Run(ctx context.Context, toolID string, input map[string]any) (map[string]any, error) {
	if CallsModel(toolID) {
		if err := g.m.Check(ctx, auth.UserID(ctx), 0); err != nil {
			if e, ok := err.(*errs.Error); ok && e.Code == CodeBudgetExceeded {
				e.Message = CodeBudgetExceeded + ": " + e.Message
			}
			return nil, err
		}
	}
	return g.r.Run(ctx, toolID, input)
}
