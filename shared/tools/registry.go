package tools

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/schema"
	"github.com/workflowchat/service/shared/tracing"
)

// idPattern is the syntax of a tool id: valid as a function name for every
// model provider and MCP client.
// Compiled on first use, not in package init: init runs at every cold
// start of each function that links this package.
var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`) })

// Registry is an immutable set of tools with compiled schemas. It is safe
// for concurrent use.
type Registry struct {
	tools   []*Tool // sorted by id
	byID    map[string]*entry
	sandbox Sandbox // runs the Isolated tools; nil: in process
}

// Sandbox runs a request in a worker process (a *sandbox.Pool serving
// WorkerHandler), admitted under key: see sandbox.Pool.Do for its
// contract. The registry passes the run's Caller as the key, so that one
// caller's runs cannot take every worker.
type Sandbox interface {
	Do(ctx context.Context, key string, request []byte) ([]byte, error)
}

// WithSandbox returns a registry with the same tools that runs the
// Isolated ones through s; nil runs them in process (tests of tool
// semantics only: in process nothing bounds their memory).
func (r *Registry) WithSandbox(s Sandbox) *Registry {
	c := *r
	c.sandbox = s
	return &c
}

// entry is one registered tool; its schemas compile on first use.
type entry struct {
	tool    *Tool
	schemas func() (schemas, error) // sync.OnceValues
}

// schemas are a tool's compiled input and output schemas.
type schemas struct {
	input, output *schema.Schema
}

func newEntry(t *Tool) *entry {
	return &entry{tool: t, schemas: sync.OnceValues(func() (schemas, error) {
		in, err := schema.Compile(t.InputSchema)
		if err != nil {
			return schemas{}, fmt.Errorf("tool %q: input schema: %w", t.ID, err)
		}
		out, err := schema.Compile(t.OutputSchema)
		if err != nil {
			return schemas{}, fmt.Errorf("tool %q: output schema: %w", t.ID, err)
		}
		return schemas{in, out}, nil
	})}
}

// compiled returns e's schemas, or an Internal error when they do not
// compile (CompileSchemas finds that before any request does).
func (e *entry) compiled(op string) (schemas, error) {
	sc, err := e.schemas()
	if err != nil {
		return sc, errs.E(op, errs.Internal, "", "tool "+e.tool.ID+" has a schema that does not compile").WithCause(err)
	}
	return sc, nil
}

// NewRegistry checks the tool definitions and returns a registry of copies
// of them. It fails, naming every problem, on a nil tool, an id not
// matching ^[a-z][a-z0-9_]{0,63}$, a duplicate id, an empty name or
// description, an unknown category, a nil Run, a negative timeout, and
// schemas that are not JSON objects with "type": "object" at the top.
// It compiles no schema: each tool's compile on its first use, so that a
// cold start pays for none (CompileSchemas compiles them all now).
func NewRegistry(ts ...*Tool) (*Registry, error) {
	r := &Registry{byID: make(map[string]*entry, len(ts))}
	var problems []error
	for i, t := range ts {
		if t == nil {
			problems = append(problems, fmt.Errorf("tool %d is nil", i))
			continue
		}
		if err := checkTool(t); err != nil {
			problems = append(problems, fmt.Errorf("tool %q: %w", t.ID, err))
			continue
		}
		if _, dup := r.byID[t.ID]; dup {
			problems = append(problems, fmt.Errorf("tool %q: duplicate id", t.ID))
			continue
		}
		if err := checkObjectSchema(t.InputSchema); err != nil {
			problems = append(problems, fmt.Errorf("tool %q: input schema: %w", t.ID, err))
			continue
		}
		if err := checkObjectSchema(t.OutputSchema); err != nil {
			problems = append(problems, fmt.Errorf("tool %q: output schema: %w", t.ID, err))
			continue
		}
		cp := *t
		cp.InputSchema = slices.Clone(t.InputSchema)
		cp.OutputSchema = slices.Clone(t.OutputSchema)
		r.byID[t.ID] = newEntry(&cp)
		r.tools = append(r.tools, &cp)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("tools: invalid tool definitions: %w", errors.Join(problems...))
	}
	slices.SortFunc(r.tools, func(a, b *Tool) int { return strings.Compare(a.ID, b.ID) })
	return r, nil
}

// CompileSchemas compiles every tool's schemas now (they otherwise compile
// on each tool's first use) and fails, naming every one, when some do not
// compile or refer to another document (schema.ErrExternalRef). Hosts that
// start once and run long (the dev server) and tests call it; a Lambda
// cold start does not.
func (r *Registry) CompileSchemas() error {
	var problems []error
	for _, t := range r.tools {
		if _, err := r.byID[t.ID].schemas(); err != nil {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("tools: schemas that do not compile: %w", errors.Join(problems...))
	}
	return nil
}

// checkTool checks a tool's fields other than its schemas.
func checkTool(t *Tool) error {
	switch {
	case !idPattern().MatchString(t.ID):
		return errors.New("id must match ^[a-z][a-z0-9_]{0,63}$")
	case strings.TrimSpace(t.Name) == "":
		return errors.New("name is empty")
	case strings.TrimSpace(t.Description) == "":
		return errors.New("description is empty")
	case !slices.Contains(Categories(), t.Category):
		return fmt.Errorf("unknown category %q (want one of %s)", t.Category, strings.Join(Categories(), ", "))
	case t.Run == nil:
		return errors.New("run function is nil")
	case t.Timeout < 0:
		return errors.New("timeout is negative")
	}
	return nil
}

// List returns every tool, ordered by id. The tools are shared with the
// registry and must not be modified.
func (r *Registry) List() []*Tool {
	return slices.Clone(r.tools)
}

// Get returns the tool with the given id, or a NotFound error with code
// TOOL_NOT_FOUND.
func (r *Registry) Get(id string) (*Tool, error) {
	e, err := r.entry("tools.Get", id)
	if err != nil {
		return nil, err
	}
	return e.tool, nil
}

func (r *Registry) entry(op, id string) (*entry, error) {
	e, ok := r.byID[id]
	if !ok {
		return nil, errs.NotFoundf(op, CodeToolNotFound, "tool %q not found", id)
	}
	return e, nil
}

// ComputeOnly reports whether tool id is registered and only computes
// from its input (Annotations.ComputeOnly).
func (r *Registry) ComputeOnly(_ context.Context, id string) bool {
	t, err := r.Get(id)
	return err == nil && t.Annotations.ComputeOnly()
}

// Search returns the tools matching query, case-insensitively. The query is
// split into words; a tool matches when every word occurs in its id, name or
// description. Tools where every word occurs in the id or name rank first,
// the rest follow; ties are ordered by id. An empty (or blank) query matches
// nothing.
func (r *Registry) Search(query string) []*Tool {
	words := strings.Fields(strings.ToLower(query))
	if len(words) == 0 {
		return nil
	}
	var primary, secondary []*Tool
	for _, t := range r.tools { // already ordered by id
		title := strings.ToLower(t.ID + " " + t.Name)
		desc := strings.ToLower(t.Description)
		inTitle, inAny := true, true
		for _, w := range words {
			tw := strings.Contains(title, w)
			inTitle = inTitle && tw
			inAny = inAny && (tw || strings.Contains(desc, w))
		}
		switch {
		case inTitle:
			primary = append(primary, t)
		case inAny:
			secondary = append(secondary, t)
		}
	}
	return append(primary, secondary...)
}

// Validate checks input against the input schema of tool id. It fails with
// TOOL_NOT_FOUND (NotFound) for an unknown tool and INVALID_PARAMS (Invalid)
// when the input does not match, with one errs.FieldError per problem: the
// field as a slash-separated path ("query", "headers/x-token") and the
// schema validator's message.
func (r *Registry) Validate(id string, input map[string]any) error {
	const op = "tools.Validate"
	e, err := r.entry(op, id)
	if err != nil {
		return err
	}
	_, err = validateInput(op, e, input)
	return err
}

// validateInput normalizes input to plain JSON and validates it, returning
// the normalized input.
func validateInput(op string, e *entry, input map[string]any) (map[string]any, error) {
	sc, err := e.compiled(op)
	if err != nil {
		return nil, err
	}
	in, err := normalizeInput(input)
	if err != nil {
		return nil, invalidParams(op, e.tool.ID, []errs.FieldError{{Field: "", Message: err.Error()}})
	}
	if probs := sc.input.Validate(in); len(probs) > 0 {
		return nil, invalidParams(op, e.tool.ID, fieldErrors(probs))
	}
	return in, nil
}

// ValidateOutput checks output against the output schema of tool id. The
// Registry does not call it when running tools; it exists for tests and for
// callers that want to verify a tool. It fails with TOOL_NOT_FOUND for an
// unknown tool and with an Internal error, code INVALID_TOOL_OUTPUT and
// field details, when the output does not match.
func (r *Registry) ValidateOutput(id string, output map[string]any) error {
	const op = "tools.ValidateOutput"
	e, err := r.entry(op, id)
	if err != nil {
		return err
	}
	sc, err := e.compiled(op)
	if err != nil {
		return err
	}
	var details []errs.FieldError
	out, err := normalizeInput(output)
	if err != nil {
		details = []errs.FieldError{{Message: err.Error()}}
	} else {
		details = fieldErrors(sc.output.Validate(out))
	}
	if len(details) > 0 {
		return &errs.Error{Op: op, Kind: errs.Internal, Code: "INVALID_TOOL_OUTPUT",
			Message: fmt.Sprintf("tool %s produced output that does not match its schema", id), Details: details}
	}
	return nil
}

// Run validates input and runs tool id under its timeout: an Isolated tool
// in a worker process when the registry has a Sandbox, any other in
// process. Errors:
//   - TOOL_NOT_FOUND (NotFound): no such tool;
//   - INVALID_PARAMS (Invalid): the input does not match the schema, or the
//     tool rejected it (a pattern that does not compile, say);
//   - TOOL_TIMEOUT (Timeout): the tool's deadline passed, or the caller's
//     deadline did (then the error wraps context.DeadlineExceeded); for an
//     isolated tool the time waiting for a free worker counts (a caller
//     waits for one while its other isolated runs hold its share of the
//     workers: see NewSandbox);
//   - TOOL_RESOURCE_LIMIT (Internal): an isolated tool exceeded its
//     worker's memory or CPU limit (the worker was stopped), or its output
//     exceeds SandboxMaxOutput;
//   - TOOL_EXECUTION_FAILED (Internal): the tool failed or panicked (or its
//     worker crashed or could not start); the message is the tool's own
//     client-safe text;
//   - the caller's cancellation, wrapped: errors.Is(err, context.Canceled).
//
// A tool that ignores its context cannot hold Run past the deadline: Run
// returns TOOL_TIMEOUT; an isolated tool's worker is killed, any other
// tool is abandoned. The output of an isolated tool holds its values as
// json.RawMessage, the worker's encoding, which marshals to the same JSON.
func (r *Registry) Run(ctx context.Context, id string, input map[string]any) (_ map[string]any, err error) {
	ctx, span := tracing.StartToolRun(ctx, id)
	defer func() { tracing.End(span, err) }()
	op := "tools.Run(" + id + ")"
	e, err := r.entry(op, id)
	if err != nil {
		return nil, err
	}
	in, err := validateInput(op, e, input)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, callerDone(op, id, err)
	}

	timeout := e.tool.timeout()
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	type result struct {
		out map[string]any
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned tool must not block forever
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{err: &errs.Error{Op: op, Kind: errs.Internal, Code: CodeToolExecutionFailed,
					Message: "tool " + id + " failed unexpectedly", Err: fmt.Errorf("panic: %v", p)}}
			}
		}()
		run := e.tool.Run
		if e.tool.Isolated && r.sandbox != nil {
			run = func(ctx context.Context, in map[string]any) (map[string]any, error) {
				return runIsolated(ctx, r.sandbox, id, in)
			}
		}
		out, err := run(runCtx, in)
		done <- result{out, err}
	}()

	select {
	case res := <-done:
		if res.err != nil {
			if runCtx.Err() != nil {
				return nil, deadlineError(op, id, ctx, timeout, res.err)
			}
			return nil, toolError(op, id, res.err)
		}
		if res.out == nil {
			res.out = map[string]any{}
		}
		return res.out, nil
	case <-runCtx.Done():
		return nil, deadlineError(op, id, ctx, timeout, runCtx.Err())
	}
}

// deadlineError classifies the end of a run whose context is done: the
// caller's cancellation or deadline, or else the tool's own timeout.
func deadlineError(op, id string, caller context.Context, timeout time.Duration, cause error) error {
	if err := caller.Err(); err != nil {
		return callerDone(op, id, err)
	}
	return &errs.Error{Op: op, Kind: errs.Timeout, Code: CodeToolTimeout,
		Message: fmt.Sprintf("tool %s did not finish within %s", id, timeout), Err: cause}
}

// callerDone wraps the caller's context error: a deadline is TOOL_TIMEOUT,
// a cancellation an Internal error with the default code; both wrap err, so
// errors.Is(result, err) holds.
func callerDone(op, id string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &errs.Error{Op: op, Kind: errs.Timeout, Code: CodeToolTimeout,
			Message: fmt.Sprintf("tool %s did not finish before the caller's deadline", id), Err: err}
	}
	return errs.E(op, errs.Internal, "", fmt.Sprintf("tool %s was canceled", id)).WithCause(err)
}

// toolError maps an error returned by a tool: Invalid errors become
// INVALID_PARAMS (with at least one detail), Timeout errors TOOL_TIMEOUT,
// TOOL_RESOURCE_LIMIT stays, anything else becomes TOOL_EXECUTION_FAILED
// with the tool's client-safe message.
func toolError(op, id string, err error) error {
	var e *errs.Error
	if errors.As(err, &e) {
		c := *e
		if c.Op == "" {
			c.Op = op
		} else {
			c.Op = op + ": " + c.Op
		}
		switch e.Kind {
		case errs.Invalid:
			c.Code = CodeInvalidParams
			if len(c.Details) == 0 {
				c.Details = []errs.FieldError{{Field: "", Message: c.Message}}
			}
			return &c
		case errs.Timeout:
			c.Code = CodeToolTimeout
			return &c
		}
		if e.Code == CodeToolResourceLimit {
			return &c
		}
		msg := e.Message
		if msg == "" {
			msg = "tool " + id + " failed"
		}
		return &errs.Error{Op: op, Kind: errs.Internal, Code: CodeToolExecutionFailed, Message: msg, Err: err}
	}
	return &errs.Error{Op: op, Kind: errs.Internal, Code: CodeToolExecutionFailed, Message: err.Error(), Err: err}
}
