package runs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/truncate"
	"github.com/workflowchat/service/shared/workflow"
)

// Large values: a run's record is one DynamoDB item (400 KB), but a step
// may produce up to MaxValueBytes. A value whose JSON is longer than
// SpillBytes, and then the largest others while the record's values pass
// truncate.MaxItem, are spilled (workflow.Spilled) to the blob store under
// the run's prefix, named by their content, and read back whole where a
// step needs them: later steps' inputs, conditions, forEach arrays, an
// MCP client's result. Without a blob store (Values nil) they are cut to
// fit instead (workflow.Bound), as a record can only hold so much.

const (
	// SpillBytes is the longest value kept in a run's record: larger ones
	// go to the blob store. Small values stay inline, so a run of small
	// values makes no blob call at all.
	SpillBytes = 32 << 10
	// MaxValueBytes bounds one value a run keeps: a step's output (a
	// forEach's results included), its resolved input, the run's input:
	// the tool server's bound on a tool value (8 MiB of JSON).
	MaxValueBytes = toolclient.MaxValueBytes
)

// Memory: the engine keeps a step's value in the form keep returns: with
// a blob store, a value over SpillBytes is spilled as soon as the step
// ends and only its cut form stays in memory; a step reads the values it
// names whole from the blob store (whole) and drops them when it ends. A
// value over MaxValueBytes fails its step with TOOL_VALUE_TOO_LARGE and is
// never stored.

// keep returns the form of m, the input or output of a step (what says
// which, for the error), the engine keeps and records: m itself when its
// JSON is at most SpillBytes or there is no blob store, else its spilled
// form. It fails with TooLarge TOOL_VALUE_TOO_LARGE when the JSON is over
// MaxValueBytes (nothing is stored), and when the blob store cannot be
// written.
func (v values) keep(ctx context.Context, what string, m map[string]any) (map[string]any, error) {
	const op = "runs.keep"
	if _, spilled := workflow.SpilledKey(m); spilled {
		return m, nil
	}
	if n := workflow.MinJSONSize(m, MaxValueBytes+1); n > MaxValueBytes {
		// Refused before it is encoded: a value built from many
		// references to one large value may be far larger than memory.
		return nil, toolclient.CheckValueSize(op, what, n)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	if err := toolclient.CheckValueSize(op, what, len(b)); err != nil {
		return nil, err
	}
	if !v.spillable() || len(b) <= SpillBytes {
		v.json.Remember(m, b)
		return m, nil
	}
	return v.put(ctx, b)
}

// results returns the kept form (see keep) of a forEach step's output
// {"results": [...]}, elements the kept forms of its elements' outputs in
// order. With a blob store, the output's JSON is assembled from the
// elements' JSON (a spilled one read back as it is stored) and stored
// without ever being decoded whole. It fails as keep does.
func (v values) results(ctx context.Context, elements []map[string]any) (map[string]any, error) {
	const op = "runs.results"
	if !v.spillable() {
		out := make([]any, len(elements))
		for j, e := range elements {
			out[j] = e
		}
		return v.keep(ctx, "the step's output", map[string]any{workflow.ForEachOutput: out})
	}
	var buf bytes.Buffer
	buf.WriteString(`{"` + workflow.ForEachOutput + `":[`)
	for j, e := range elements {
		if j > 0 {
			buf.WriteByte(',')
		}
		var b []byte
		var err error
		if key, spilled := workflow.SpilledKey(e); spilled {
			b, _, err = blob.ReadAll(ctx, v.backend, key, MaxValueBytes)
		} else {
			b, err = json.Marshal(e)
		}
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
		buf.Write(b)
		if err := toolclient.CheckValueSize(op, "the step's output", buf.Len()+2); err != nil {
			return nil, err
		}
	}
	buf.WriteString("]}")
	b := buf.Bytes()
	if len(b) > SpillBytes {
		return v.put(ctx, b)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, errs.E(op, errs.Internal, "", "internal error").WithCause(err)
	}
	return out, nil
}

// values reads and writes a run's spilled values; a zero values (no
// backend) spills nothing.
type values struct {
	backend blob.Backend
	runID   string
	// json remembers the values' JSON between checkpoints (nil: none).
	json *workflow.ValueJSON
}

// spillable reports whether values are spilled rather than cut.
func (v values) spillable() bool { return v.backend != nil }

// put stores the JSON b under its content's key and returns its spilled
// form. A value already stored under that key is stored again, the same.
func (v values) put(ctx context.Context, b []byte) (map[string]any, error) {
	sum := sha256.Sum256(b)
	key := fmt.Sprintf("%s%x.json", workflow.RunBlobPrefix(v.runID), sum[:16])
	if _, err := blob.PutBytes(ctx, v.backend, key, b, "application/json"); err != nil {
		return nil, errs.Wrap("runs.spill", err)
	}
	return workflow.Spilled(b, key), nil
}

// whole returns m whole: m itself, or the value a spilled m refers to.
// It fails when the blob store cannot be read or has lost the value.
func (v values) whole(ctx context.Context, m map[string]any) (map[string]any, error) {
	key, ok := workflow.SpilledKey(m)
	if !ok {
		return m, nil
	}
	if v.backend == nil {
		return nil, errs.E("runs.whole", errs.Internal, "", "internal error").WithCause(fmt.Errorf("value %s is spilled, and no blob store is configured", key))
	}
	b, _, err := blob.ReadAll(ctx, v.backend, key, MaxValueBytes+1)
	if err != nil {
		return nil, errs.Wrap("runs.whole", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, errs.E("runs.whole", errs.Internal, "", "internal error").WithCause(fmt.Errorf("value %s: %w", key, err))
	}
	return out, nil
}

// slot is one value of a run's record.
type slot struct {
	get  func() map[string]any
	set  func(map[string]any)
	size int
	json []byte
}

// cutBytes is about the most a spilled value's cut form holds in the
// record: its preview (workflow.SpilledPreview), the blob's key and size;
// spilling a value no larger gains nothing.
const cutBytes = workflow.SpilledPreview + 256

// fit spills run's values so that its record fits: every value over
// SpillBytes, then the largest others while together they pass
// truncate.MaxItem. Values already spilled stay as they are. Without a
// blob store the values are cut instead (workflow.Bound). It fails when
// the blob store cannot be written.
func (v values) fit(ctx context.Context, run *workflow.Run) error {
	defer v.json.Retain(run)
	if !v.spillable() {
		workflow.Bound(run, v.json)
		return nil
	}
	var slots []*slot
	for i := range run.Steps {
		s := &run.Steps[i]
		_, in := workflow.SpilledKey(s.Input)
		_, out := workflow.SpilledKey(s.Output)
		s.Truncated = s.Truncated || in || out // spilled by keep
		slots = append(slots,
			&slot{get: func() map[string]any { return s.Input }, set: func(m map[string]any) { s.Input, s.Truncated = m, true }},
			&slot{get: func() map[string]any { return s.Output }, set: func(m map[string]any) { s.Output, s.Truncated = m, true }})
	}
	total := 0
	for _, sl := range slots {
		m := sl.get()
		if m == nil {
			continue
		}
		b, err := v.json.Encode(m)
		if err != nil {
			return errs.Wrap("runs.fit", err)
		}
		sl.size = len(b)
		if _, spilled := workflow.SpilledKey(m); !spilled {
			sl.json = b
		}
		total += sl.size
	}
	spill := func(sl *slot) error {
		m, err := v.put(ctx, sl.json)
		if err != nil {
			return err
		}
		sl.set(m)
		// Its cut form stays in the record: a preview and the blob's key,
		// about SpilledPreview bytes.
		b, err := v.json.Encode(m)
		if err != nil {
			return errs.Wrap("runs.fit", err)
		}
		total += len(b) - sl.size
		sl.size, sl.json = len(b), nil
		return nil
	}
	for _, sl := range slots {
		if sl.json != nil && sl.size > SpillBytes {
			if err := spill(sl); err != nil {
				return err
			}
		}
	}
	for total > truncate.MaxItem {
		i := slices.IndexFunc(slots, func(sl *slot) bool { return sl.json != nil && sl.size > cutBytes })
		if i < 0 {
			break
		}
		for j, sl := range slots {
			if sl.json != nil && sl.size > slots[i].size {
				i = j
			}
		}
		if err := spill(slots[i]); err != nil {
			return err
		}
	}
	return nil
}

// element returns the JSON a forEach element's output (whose JSON is b)
// is recorded as, and the form the engine keeps (see keep): b and out
// when b is at most SpillBytes; else, with a blob store, the spilled form
// for both; without one, b cut to SpillBytes and out.
func (v values) element(ctx context.Context, out map[string]any, b []byte) ([]byte, map[string]any, error) {
	if len(b) <= SpillBytes {
		return b, out, nil
	}
	if !v.spillable() {
		return truncate.Cut(b, SpillBytes), out, nil
	}
	m, err := v.put(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	rec, err := json.Marshal(m)
	return rec, m, errs.Wrap("runs.element", err)
}

// plan reads run's snapshot of its steps from the blob store when it is
// kept there (run.PlanRef). It fails when the store cannot be read.
func (v values) plan(ctx context.Context, run *workflow.Run) error {
	if run.PlanRef == "" || run.Plan != nil {
		return nil
	}
	if v.backend == nil {
		return errs.E("runs.plan", errs.Internal, "", "internal error").WithCause(fmt.Errorf("run %s's plan is in the blob store, and none is configured", run.ID))
	}
	b, _, err := blob.ReadAll(ctx, v.backend, run.PlanRef, MaxValueBytes)
	if err != nil {
		return errs.Wrap("runs.plan", err)
	}
	if err := json.Unmarshal(b, &run.Plan); err != nil {
		return errs.E("runs.plan", errs.Internal, "", "internal error").WithCause(fmt.Errorf("plan %s: %w", run.PlanRef, err))
	}
	return nil
}
