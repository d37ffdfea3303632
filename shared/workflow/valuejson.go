package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"
)

// ValueJSON remembers the JSON of the values a run's steps hold (their
// inputs and outputs), so that a checkpoint, which records every step,
// encodes only the values that are new since the last one: without it a
// run of n steps encodes its values about n²/2 times over its n
// checkpoints (the record's size check and the record itself each
// encode every step again), with it about n times.
//
// A value is known by identity, the map itself: an entry holds its map,
// so the map's address is not reused while it is remembered. That is
// sound because the engine never changes a value it holds in place: a
// cut, spilled or replaced value is a new map. A value whose JSON is
// over MaxRememberedBytes is not remembered (it is encoded each time), so
// what a run's ValueJSON holds stays within 2 x MaxRememberedBytes a
// step whatever the values. A nil *ValueJSON remembers nothing (every
// call encodes). Safe for concurrent use.
type ValueJSON struct {
	mu sync.Mutex
	m  map[uintptr]valueJSON
}

// MaxRememberedBytes is the largest JSON of a value a ValueJSON keeps.
const MaxRememberedBytes = 32 << 10

type valueJSON struct {
	v map[string]any // holds the map, so that its address names it
	b []byte
}

// NewValueJSON returns an empty ValueJSON.
func NewValueJSON() *ValueJSON { return &ValueJSON{m: map[uintptr]valueJSON{}} }

func identity(v map[string]any) uintptr { return reflect.ValueOf(v).Pointer() }

// Encode returns v's JSON as json.Marshal encodes it ("null" for nil),
// from memory when v was encoded or remembered before. The bytes are
// shared: callers must not change them. It fails as json.Marshal does.
func (c *ValueJSON) Encode(v map[string]any) ([]byte, error) {
	if c == nil || v == nil {
		return json.Marshal(v)
	}
	id := identity(v)
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		return e.b, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	c.Remember(v, b)
	return b, nil
}

// Remember records b, which the caller encoded with json.Marshal, as v's
// JSON.
func (c *ValueJSON) Remember(v map[string]any, b []byte) {
	if c == nil || v == nil || len(b) > MaxRememberedBytes {
		return
	}
	c.mu.Lock()
	c.m[identity(v)] = valueJSON{v: v, b: b}
	c.mu.Unlock()
}

// Retain forgets every value r's steps no longer hold, so that what
// is remembered stays within what the run's record holds.
func (c *ValueJSON) Retain(r *Run) {
	if c == nil {
		return
	}
	held := make(map[uintptr]bool, 2*len(r.Steps))
	for _, s := range r.Steps {
		for _, v := range []map[string]any{s.Input, s.Output} {
			if v != nil {
				held[identity(v)] = true
			}
		}
	}
	c.mu.Lock()
	for id := range c.m {
		if !held[id] {
			delete(c.m, id)
		}
	}
	c.mu.Unlock()
}

// Len returns how many values c remembers.
func (c *ValueJSON) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// EncodeSteps returns the JSON array of steps, each as EncodeStep
// encodes it. It fails as json.Marshal does.
func EncodeSteps(steps []RunStep, c *ValueJSON) ([]byte, error) {
	if c == nil {
		if steps == nil {
			steps = []RunStep{}
		}
		return json.Marshal(steps)
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, s := range steps {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := EncodeStep(s, c)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// SameRecord reports whether s and o encode alike (EncodeStep): every
// encoded field equal, times by value, and their input and output the
// same maps (values are never changed once held, as ValueJSON assumes).
// It may say false of steps that encode alike, never true of steps that
// do not.
func (s RunStep) SameRecord(o RunStep) bool {
	return s.ID == o.ID && s.ToolID == o.ToolID && s.Status == o.Status &&
		sameTime(s.StartedAt, o.StartedAt) && sameTime(s.CompletedAt, o.CompletedAt) &&
		identity(s.Input) == identity(o.Input) && identity(s.Output) == identity(o.Output) &&
		s.Error == o.Error && s.Truncated == o.Truncated && s.Reused == o.Reused &&
		samePtr(s.ElementsDone, o.ElementsDone) && s.InputURL == o.InputURL && s.OutputURL == o.OutputURL &&
		sameTime(s.ExpiresAt, o.ExpiresAt) &&
		slices.EqualFunc(s.Attempts, o.Attempts, func(a, b StepAttempt) bool {
			return a.Attempt == b.Attempt && sameTime(a.StartedAt, b.StartedAt) && sameTime(a.CompletedAt, b.CompletedAt) &&
				a.Status == b.Status && a.Error == b.Error
		}) &&
		sameTime(s.RetryAt, o.RetryAt) && s.ChildRunID == o.ChildRunID && s.Reason == o.Reason &&
		s.MCPServerID == o.MCPServerID && s.AuthorizationURL == o.AuthorizationURL &&
		s.AuthorizationWaitedMs == o.AuthorizationWaitedMs && s.RetryWaitedMs == o.RetryWaitedMs
}

// sameTime reports whether a and b are both nil or the same instant in
// the same location (as they encode).
func sameTime(a, b *time.Time) bool {
	return a == b || (a != nil && b != nil && a.Equal(*b) && a.Location() == b.Location())
}

func samePtr[T comparable](a, b *T) bool { return a == b || (a != nil && b != nil && *a == *b) }

// EncodeStep returns s's JSON as json.Marshal encodes it, but for the
// order of its members: its input and output come last, their JSON from
// c (see Encode; nil c: encoded here). It fails as json.Marshal does.
func EncodeStep(s RunStep, c *ValueJSON) ([]byte, error) {
	in, out := s.Input, s.Output
	s.Input, s.Output = nil, nil
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("encode step %s: not an object", s.ID)
	}
	buf := bytes.NewBuffer(make([]byte, 0, len(b)+64))
	buf.Write(b[:len(b)-1])
	empty := len(b) == 2 // "{}": no member yet
	// As the members' omitempty does: an empty value is left out.
	for _, m := range []struct {
		name string
		v    map[string]any
	}{{"input", in}, {"output", out}} {
		if len(m.v) == 0 {
			continue
		}
		vb, err := c.Encode(m.v)
		if err != nil {
			return nil, err
		}
		if !empty {
			buf.WriteByte(',')
		}
		empty = false
		buf.WriteString(`"` + m.name + `":`)
		buf.Write(vb)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
