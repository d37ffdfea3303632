package measure

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"

	"github.com/workflowchat/service/infra/cost/costmodel"
	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/trigger"
)

// InProcess is a Host in this process: the dev server's stack
// (infra/local, the functions' own builders) on the embedded DynamoDB
// engine, every DynamoDB call measured by a store.CapacityMeter. Each
// request is served by its function's router alone, so a request sent to
// the wrong function fails.
type InProcess struct {
	stack    *local.Stack
	meter    *store.CapacityMeter
	handlers map[string]http.Handler
}

// NewInProcess builds the stack from env (the variables of config.Load).
// It fails as config.Load and local.New do.
func NewInProcess(ctx context.Context, env map[string]string) (*InProcess, error) {
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.DiscardHandler)
	meter := &store.CapacityMeter{}
	s, err := local.New(ctx, cfg, local.Options{Capacity: meter, Logger: logger})
	if err != nil {
		return nil, err
	}
	p := &InProcess{stack: s, meter: meter, handlers: map[string]http.Handler{}}
	for _, f := range s.Functions {
		p.handlers[f.Dir] = httpapi.Stack(f.Router, httpapi.Options{Logger: logger})
	}
	return p, nil
}

// Close stops the stack's engine.
func (p *InProcess) Close() error { return p.stack.Close() }

// Functions are the stack's HTTP functions.
func (p *InProcess) Functions() []local.Function { return p.stack.Functions }

// Do serves r by function fn's router.
func (p *InProcess) Do(ctx context.Context, fn string, r *http.Request) (*Response, error) {
	h := p.handlers[fn]
	if h == nil {
		return nil, fmt.Errorf("no HTTP function %q in the stack", fn)
	}
	r = r.WithContext(ctx)
	if r.RemoteAddr == "" {
		r.RemoteAddr = "203.0.113.9:4321"
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return &Response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}, nil
}

// Invoke runs a sweep for "sweeper" and a schedule's fire for
// "triggerfire" (event: FireEvent's); the stack has no other function
// without routes to run.
func (p *InProcess) Invoke(ctx context.Context, fn string, event any) error {
	switch fn {
	case "sweeper":
		_, err := p.stack.Sweeper.Sweep(ctx)
		return err
	case "triggerfire":
		b, err := json.Marshal(event)
		if err != nil {
			return err
		}
		var ev trigger.FireEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			return fmt.Errorf("triggerfire: %w", err)
		}
		_, err = p.stack.Poller.Fire(ctx, ev)
		return err
	}
	return fmt.Errorf("in process, %s is not run by event", fn)
}

// Settle waits for the durable runs in progress.
func (p *InProcess) Settle(context.Context) error {
	p.stack.Runner.Wait()
	return nil
}

// capacityRecorder sums the meter's counts per kind of unit.
type capacityRecorder struct {
	meter        *store.CapacityMeter
	before       store.Capacity
	beforeByKind map[string]store.Capacity
	sums         map[string]store.Capacity
	byKind       map[string]map[string]store.Capacity // unit kind -> call kind -> sum
	units        map[string]int
}

func (r *capacityRecorder) Begin(string) {
	r.before, r.beforeByKind = r.meter.Snapshot(), r.meter.ByKind()
}

func (r *capacityRecorder) End(kind string) {
	r.sums[kind] = r.sums[kind].Add(r.meter.Snapshot().Sub(r.before))
	if r.byKind[kind] == nil {
		r.byKind[kind] = map[string]store.Capacity{}
	}
	for call, c := range r.meter.ByKind() {
		if d := c.Sub(r.beforeByKind[call]); d.Calls() > 0 {
			r.byKind[kind][call] = r.byKind[kind][call].Add(d)
		}
	}
	r.units[kind]++
}

// MeasureCapacity runs w (without its coverage requests) in process and
// returns, per kind of unit, the DynamoDB capacity one unit consumed on
// average, as the calls' ConsumedCapacity reported it. It fails when the
// workload fails, or when a call's answer reported no capacity.
func MeasureCapacity(ctx context.Context, w Workload) (map[string]costmodel.DynamoDB, error) {
	model := StartModel(w)
	defer model.Close()
	p, err := NewInProcess(ctx, Env(model.URL))
	if err != nil {
		return nil, err
	}
	defer p.Close()
	w.Coverage = false
	rec := &capacityRecorder{meter: p.meter, sums: map[string]store.Capacity{}, byKind: map[string]map[string]store.Capacity{}, units: map[string]int{}}
	if err := Run(ctx, p, w, rec); err != nil {
		return nil, err
	}
	return rec.averages()
}

// averages are the recorder's sums per kind divided by the units of that
// kind: what one unit consumed, split by kind of call (largest write
// units first). It fails when a call's answer reported no capacity.
func (rec *capacityRecorder) averages() (map[string]costmodel.DynamoDB, error) {
	if n := rec.meter.Snapshot().Unreported; n > 0 {
		return nil, fmt.Errorf("%d DynamoDB calls reported no consumed capacity", n)
	}
	out := map[string]costmodel.DynamoDB{}
	for kind, s := range rec.sums {
		n := float64(rec.units[kind])
		var calls []costmodel.Call
		for call, c := range rec.byKind[kind] {
			calls = append(calls, costmodel.Call{Kind: call, Calls: float64(c.Calls()) / n, ReadUnits: c.ReadUnits / n, WriteUnits: c.WriteUnits / n})
		}
		slices.SortFunc(calls, func(a, b costmodel.Call) int {
			return cmp.Or(cmp.Compare(b.WriteUnits, a.WriteUnits), cmp.Compare(b.ReadUnits, a.ReadUnits), cmp.Compare(a.Kind, b.Kind))
		})
		out[kind] = costmodel.DynamoDB{ReadUnits: s.ReadUnits / n, WriteUnits: s.WriteUnits / n, Calls: float64(s.Reads+s.Writes) / n,
			FailedReads: float64(s.FailedReads) / n, FailedWrites: float64(s.FailedWrites) / n, ByCall: calls}
	}
	return out, nil
}
