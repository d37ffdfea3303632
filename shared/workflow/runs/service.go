package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/tracing"
	"github.com/workflowchat/service/shared/workflow"
	"github.com/workflowchat/service/shared/workflow/inputschema"
)

// WorkflowReader reads a workflow by id: NotFound WORKFLOW_NOT_FOUND;
// and version n of w (as read): NotFound VERSION_NOT_FOUND. The workflow
// Store (store.Workflows) implements it.
type WorkflowReader interface {
	Workflow(ctx context.Context, id string) (workflow.Workflow, error)
	WorkflowVersion(ctx context.Context, w workflow.Workflow, n int) (workflow.Version, error)
}

// WaitBound is how long a run started without Prefer: respond-async is
// waited for before the answer says where to follow it: within API
// Gateway's 30 s.
const WaitBound = 25 * time.Second

// Service implements the workflow run operations: start a durable run,
// wait for it, follow its events, cancel, retry and list runs.
type Service struct {
	store     Store
	jobs      job.Store
	workflows WorkflowReader
	invoker   workflow.Invoker
	lease     time.Duration
	now       func() time.Time
	ended     func(ctx context.Context, run workflow.Run) error
	values    blob.Store
	files     Files
	limiter   *ratelimit.Limiter
	rule      ratelimit.Rule
	authWaits AuthWaits
}

// Options are the dependencies of NewService. Lease zero means
// job.LeaseTime; Now nil means time.Now.
type Options struct {
	Store     Store
	Jobs      job.Store
	Workflows WorkflowReader
	// Invoker hands a stored run to a Runner.
	Invoker workflow.Invoker
	Lease   time.Duration
	Now     func() time.Time
	// Ended, when set, is told of every run whose log the Service ends
	// (a waiting run cancelled): see RunnerOptions.Ended.
	Ended func(ctx context.Context, run workflow.Run) error
	// Values keeps runs' values too large for their records (the blob
	// store: runs' inputs, human steps' answers; reads of a run sign URLs
	// of them). Nil: they are kept inline while they fit.
	Values blob.Store
	// Files checks the attachments a run's input names (its properties
	// of format attachment); nil: such inputs are refused.
	Files Files
	// Limiter and Rule limit the runs each user starts (RATE_LIMIT_RUNS):
	// every run Start, Retry and StartTriggered store counts once, after
	// its checks, whatever started it. A nil Limiter limits nothing.
	Limiter *ratelimit.Limiter
	Rule    ratelimit.Rule
	// AuthWaits keeps the runs waiting for the authorization of a remote
	// server, which Authorized continues; nil: none is found (the
	// sweeper's AuthCheck resumes them).
	AuthWaits AuthWaits
}

// Files are the attachments a run's input may name (attachment.Service).
type Files interface {
	// CheckFile returns nil when id is one of userID's ready attachments
	// whose text a run can read; the attachment's error otherwise.
	CheckFile(ctx context.Context, userID, id string) error
	// FileText returns that text.
	FileText(ctx context.Context, userID, id string) (string, error)
}

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Lease <= 0 {
		o.Lease = job.LeaseTime
	}
	return &Service{store: o.Store, jobs: o.Jobs, workflows: o.Workflows, invoker: o.Invoker, lease: o.Lease, now: o.Now, ended: o.Ended, values: o.Values, files: o.Files,
		limiter: o.Limiter, rule: o.Rule, authWaits: o.AuthWaits}
}

// ownedWorkflow returns the caller's workflow id: NotFound
// WORKFLOW_NOT_FOUND, then Forbidden.
func (s *Service) ownedWorkflow(ctx context.Context, op, id string) (workflow.Workflow, error) {
	return auth.Owned(ctx, op, func(ctx context.Context) (workflow.Workflow, error) { return s.workflows.Workflow(ctx, id) },
		func(w workflow.Workflow) string { return w.UserID })
}

// CheckWorkflow returns workflowID if it is the caller's: NotFound
// WORKFLOW_NOT_FOUND, then Forbidden.
func (s *Service) CheckWorkflow(ctx context.Context, workflowID string) (workflow.Workflow, error) {
	return s.ownedWorkflow(ctx, "workflow.CheckWorkflow", workflowID)
}

// CheckStart returns workflowID if a run of it can start with input: it
// is the caller's (NotFound WORKFLOW_NOT_FOUND, then Forbidden) and input
// matches its inputSchema (Invalid INVALID_INPUT). What starts a run
// after answering 200 (the chat stream) checks first.
func (s *Service) CheckStart(ctx context.Context, workflowID string, input map[string]any) (workflow.Workflow, error) {
	const op = "workflow.CheckStart"
	wf, err := s.ownedWorkflow(ctx, op, workflowID)
	if err != nil {
		return workflow.Workflow{}, err
	}
	if _, err := inputschema.ValidateInput(wf.InputSchema, input); err != nil {
		return workflow.Workflow{}, errs.Wrap(op, err)
	}
	return wf, nil
}

// StartRequest names the run to start: the caller's workflow, in the
// caller's chat ChatID or none, with Input, recording Trigger (nil:
// manual). RunID, when set, is the id the run must have (a trigger's, so
// that a repeated fire or webhook call starts nothing new).
type StartRequest struct {
	ChatID     string
	WorkflowID string
	Input      map[string]any
	Trigger    *workflow.Trigger
	RunID      string
	// Version, when not 0, is the workflow's version to run (a trigger's
	// pin); 0 runs the current one.
	Version int
	// parent, when set, is the run whose run_workflow step starts this
	// one (StartChild).
	parent *workflow.Run
}

// Start stores a pending durable run of the caller's workflow, hands it
// to the runner and returns it without waiting. The input is checked
// against the workflow's inputSchema (defaults applied), the attachments
// it names are checked, and the run counts against the caller's run rate
// limit. Errors: NotFound (CHAT_NOT_FOUND, WORKFLOW_NOT_FOUND), Forbidden,
// in that order (the chat first); Invalid INVALID_INPUT; RateLimited
// RATE_LIMITED; Conflict RUN_EXISTS when req.RunID is taken; storage
// errors. A runner that cannot be reached is not an error:
// the sweeper hands the run over once its first lease expires.
func (s *Service) Start(ctx context.Context, req StartRequest) (workflow.Run, error) {
	const op = "workflow.StartRun"
	wf, err := s.startable(ctx, op, req.ChatID, req.WorkflowID)
	if err != nil {
		return workflow.Run{}, err
	}
	if wf, err = s.pinned(ctx, wf, req.Version); err != nil {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	input, err := inputschema.ValidateInput(wf.InputSchema, req.Input)
	if err != nil {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	files, err := s.checkFiles(ctx, op, wf, input)
	if err != nil {
		return workflow.Run{}, err
	}
	run := NewRun(wf, req.ChatID, auth.UserID(ctx), s.now())
	run.InputFiles = files
	if req.RunID != "" {
		run.ID = req.RunID
	}
	if len(input) > 0 {
		run.Input = input
	}
	run.Trigger = req.Trigger
	if p := req.parent; p != nil {
		run.ParentRunID, run.Depth, run.Lineage = p.ID, p.Depth+1, append(slices.Clone(p.Lineage), p.WorkflowID)
	}
	if run.Trigger == nil {
		run.Trigger = &workflow.Trigger{Type: workflow.TriggerManual}
	}
	return run, s.launch(ctx, op, run, nil)
}

var errNoRunner = errs.E("runs.Service", errs.Internal, "RUNNER_UNAVAILABLE", "this function does not start workflow runs")

// launch counts the run against its user's run rate limit, stores it and
// invokes the runner on it: the one way every run starts. A retry
// (retryAfter set: the latest retry of its chain, as read on the chain's
// root) is stored with Store.CreateRetry.
func (s *Service) launch(ctx context.Context, op string, run workflow.Run, retryAfter *string) error {
	if s.invoker == nil {
		return errs.Wrap(op, errNoRunner)
	}
	if err := s.limiter.Allow(ctx, run.UserID, s.rule); err != nil {
		return errs.Wrap(op, err)
	}
	stored := run
	if b, err := json.Marshal(run.Input); err == nil && len(b) > SpillBytes && s.values != nil {
		if stored.Input, err = s.runValues(run.ID).put(ctx, b); err != nil {
			return errs.Wrap(op, err)
		}
	}
	lease := job.Lease{Until: s.now().Add(s.lease)}
	create := func() error { return s.store.CreateRun(ctx, stored, lease) }
	if retryAfter != nil {
		create = func() error { return s.store.CreateRetry(ctx, stored, lease, *retryAfter) }
	}
	if err := create(); err != nil {
		return errs.Wrap(op, err)
	}
	tracing.RunStarted(ctx, run.ID)
	if err := s.invoker.Invoke(ctx, workflow.RunRef{RunID: run.ID, Attempt: run.Attempt}); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "invoke the runner; the sweeper will", "runId", run.ID, "err", err.Error())
	}
	return nil
}

// checkFiles checks the attachments input names (wf's input properties
// of format attachment, validated as strings) and returns those
// properties' names. Invalid INVALID_INPUT naming input.<name> when one is
// not the caller's readable attachment, or when s takes no files.
func (s *Service) checkFiles(ctx context.Context, op string, wf workflow.Workflow, input map[string]any) ([]string, error) {
	if len(wf.InputSchema) == 0 {
		return nil, nil
	}
	schema, err := inputschema.Check(wf.InputSchema)
	if err != nil {
		return nil, errs.E(op, errs.Invalid, "INVALID_INPUT_SCHEMA", "the workflow's inputSchema "+err.Error())
	}
	var names []string
	var bad errs.FieldErrors
	for _, name := range schema.Attachments() {
		id, given := input[name].(string)
		if !given {
			continue
		}
		names = append(names, name)
		switch {
		case s.files == nil:
			bad.Add("input."+name, "names an attachment, which runs started here cannot read")
		default:
			if err := s.files.CheckFile(ctx, auth.UserID(ctx), id); err != nil {
				bad.Add("input."+name, "%s", errs.MessageOf(err, "is not one of your ready attachments"))
			}
		}
	}
	if len(bad) > 0 {
		e := errs.Fields(op, bad...)
		e.Code = "INVALID_INPUT"
		return nil, e
	}
	return names, nil
}

// runValues returns the values of run runID (none when s has no blob
// store).
func (s *Service) runValues(runID string) values {
	v := values{runID: runID}
	if s.values != nil {
		v.backend = s.values
	}
	return v
}

// Value returns v, a value of run runID, whole: v itself, or the value a
// spilled v refers to (an MCP client's result). It fails when the blob
// store cannot be read.
func (s *Service) Value(ctx context.Context, runID string, v map[string]any) (map[string]any, error) {
	return s.runValues(runID).whole(ctx, v)
}

// OutputURLTTL is how long the URLs of a run's large values work.
const OutputURLTTL = 15 * time.Minute

// forClient returns run as a client reads it: spilled values in their
// cut form with a presigned URL of the whole (inputUrl, outputUrl), and
// how many elements a running forEach step has done.
func (s *Service) forClient(ctx context.Context, run workflow.Run) (workflow.Run, error) {
	const op = "workflow.GetRun"
	run.Steps = slices.Clone(run.Steps)
	for i := range run.Steps {
		st := &run.Steps[i]
		for _, f := range []struct {
			v   *map[string]any
			url *string
		}{{&st.Input, &st.InputURL}, {&st.Output, &st.OutputURL}} {
			key, ok := workflow.SpilledKey(*f.v)
			if !ok {
				continue
			}
			*f.v = workflow.WithoutKey(*f.v)
			if s.values == nil {
				continue
			}
			p, err := s.values.PresignGet(ctx, key, OutputURLTTL)
			if err != nil {
				return workflow.Run{}, errs.Wrap(op, err)
			}
			*f.url = p.URL
		}
		if _, forEach := st.Input["forEach"]; forEach && (st.Status == workflow.StepRunning || st.Reason == workflow.WaitAuthorization) {
			n, err := s.store.CountElements(ctx, run.ID, st.ID)
			if err != nil {
				return workflow.Run{}, errs.Wrap(op, err)
			}
			st.ElementsDone = &n
		}
	}
	if _, ok := workflow.SpilledKey(run.Input); ok {
		run.Input = workflow.WithoutKey(run.Input)
	}
	return run, nil
}

// startable checks that the caller may run workflow workflowID in chat
// chatID (none when empty) and returns the workflow (see Start).
func (s *Service) startable(ctx context.Context, op, chatID, workflowID string) (workflow.Workflow, error) {
	var (
		owner         string
		wf            workflow.Workflow
		ownErr, wfErr error
	)
	g, gctx := errgroup.WithContext(ctx)
	if chatID != "" {
		g.Go(func() error { owner, ownErr = s.store.ChatOwner(gctx, chatID); return nil })
	}
	g.Go(func() error { wf, wfErr = s.workflows.Workflow(gctx, workflowID); return nil })
	_ = g.Wait()
	if chatID != "" {
		if ownErr != nil {
			return workflow.Workflow{}, errs.Wrap(op, ownErr)
		}
		if err := auth.Authorize(ctx, op, owner); err != nil {
			return workflow.Workflow{}, err
		}
	}
	if wfErr != nil {
		return workflow.Workflow{}, errs.Wrap(op, wfErr)
	}
	if err := auth.Authorize(ctx, op, wf.UserID); err != nil {
		return workflow.Workflow{}, err
	}
	return wf, nil
}

// Wait follows run runID's log until the run's last event, a human step
// that waits for an answer, or for at most bound, then returns the run as
// stored and whether it has finished. The
// run itself goes on whatever happens to the wait. It fails with the
// store's errors, NotFound RUN_NOT_FOUND.
func (s *Service) Wait(ctx context.Context, runID string, bound time.Duration) (workflow.Run, bool, error) {
	const op = "workflow.WaitRun"
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := s.Follow(wctx, runID, 0, func(e workflow.RunEvent) error {
		if e.Type == workflow.EventStepWaiting && e.ChildRunID == "" {
			return errPaused // it waits for a person, not for compute
		}
		return nil
	})
	if err != nil && err != errPaused && wctx.Err() == nil {
		return workflow.Run{}, false, errs.Wrap(op, err)
	}
	r, err := s.store.Run(ctx, runID)
	if err != nil {
		return workflow.Run{}, false, errs.Wrap(op, err)
	}
	r, err = s.forClient(ctx, r)
	return r, err == nil && !workflow.Active(r.Status), err
}

// errPaused stops a follow at a step_waiting event.
var errPaused = errors.New("the run waits for an answer")

// Follow yields run runID's events after seq after, decoded, until its
// last event, ctx's end or yield's first error, which it returns. It
// checks no owner: callers do. NotFound RUN_NOT_FOUND when the run has no
// log.
func (s *Service) Follow(ctx context.Context, runID string, after int64, yield func(workflow.RunEvent) error) error {
	f, err := s.follower(ctx, runID, after)
	if err != nil {
		return err
	}
	return f.Follow(ctx, func(rec job.Record) error {
		var ev workflow.RunEvent
		if err := decodeEvent(rec, &ev); err != nil {
			return err
		}
		return yield(ev)
	})
}

func (s *Service) follower(ctx context.Context, runID string, after int64) (*job.Follower, error) {
	f, err := job.NewFollower(ctx, s.jobs, runRef(runID), after, isLastEvent)
	if errs.Is(err, errs.NotFound) {
		return nil, errs.E("workflow.RunEvents", errs.NotFound, workflow.CodeRunNotFound, "workflow run not found")
	}
	return f, err
}

func runRef(id string) job.Ref { return job.Ref{Kind: workflow.RunKind, Collection: id, ID: id} }

// Run returns run runID as stored, checking no owner (callers do).
// NotFound RUN_NOT_FOUND.
func (s *Service) Run(ctx context.Context, runID string) (workflow.Run, error) {
	r, err := s.store.Run(ctx, runID)
	return r, errs.Wrap("workflow.Run", err)
}

// Scope is where a run is addressed: in a chat (ChatID, the
// /api/chats/{chatId}/workflow-runs routes) or under its workflow
// (WorkflowID, /api/workflows/{workflowId}/runs), whatever started it.
type Scope struct {
	ChatID     string
	WorkflowID string
}

// Location returns the URL path of run id in the scope.
func (sc Scope) Location(id string) string {
	if sc.ChatID != "" {
		return "/api/chats/" + sc.ChatID + "/workflow-runs/" + id
	}
	return "/api/workflows/" + sc.WorkflowID + "/runs/" + id
}

// owner returns the owner of the scope's chat or workflow. NotFound
// CHAT_NOT_FOUND or WORKFLOW_NOT_FOUND.
func (s *Service) owner(ctx context.Context, sc Scope) (string, error) {
	if sc.ChatID != "" {
		return s.store.ChatOwner(ctx, sc.ChatID)
	}
	wf, err := s.workflows.Workflow(ctx, sc.WorkflowID)
	return wf.UserID, err
}

// inScope returns run runID of the caller's chat or workflow: the scope's
// owner and the run read in parallel. NotFound CHAT_NOT_FOUND or
// WORKFLOW_NOT_FOUND, Forbidden, NotFound RUN_NOT_FOUND (also for a run of
// another chat or workflow), in that order.
func (s *Service) inScope(ctx context.Context, op string, sc Scope, runID string) (workflow.Run, error) {
	var (
		owner          string
		run            workflow.Run
		ownErr, runErr error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { owner, ownErr = s.owner(gctx, sc); return nil })
	g.Go(func() error { run, runErr = s.store.Run(gctx, runID); return nil })
	_ = g.Wait()
	if ownErr != nil {
		return workflow.Run{}, errs.Wrap(op, ownErr)
	}
	if err := auth.Authorize(ctx, op, owner); err != nil {
		return workflow.Run{}, err
	}
	if runErr != nil {
		return workflow.Run{}, errs.Wrap(op, runErr)
	}
	if (sc.ChatID != "" && run.ChatID != sc.ChatID) || (sc.ChatID == "" && run.WorkflowID != sc.WorkflowID) {
		return workflow.Run{}, errs.E(op, errs.NotFound, workflow.CodeRunNotFound, "workflow run not found")
	}
	return run, nil
}

// Get returns run runID of the caller's chat or workflow: NotFound
// (CHAT_NOT_FOUND, WORKFLOW_NOT_FOUND, RUN_NOT_FOUND), Forbidden.
func (s *Service) Get(ctx context.Context, sc Scope, runID string) (workflow.Run, error) {
	r, err := s.inScope(ctx, "workflow.GetRun", sc, runID)
	if err != nil {
		return workflow.Run{}, err
	}
	return s.forClient(ctx, r)
}

// Events returns a follower of the events of run runID of the caller's
// chat or workflow after seq (0: from run_started). NotFound
// (CHAT_NOT_FOUND, WORKFLOW_NOT_FOUND, RUN_NOT_FOUND, also when its log
// expired), Forbidden.
func (s *Service) Events(ctx context.Context, sc Scope, runID string, after int64) (*job.Follower, error) {
	const op = "workflow.RunEvents"
	if _, err := s.inScope(ctx, op, sc, runID); err != nil {
		return nil, err
	}
	f, err := s.follower(ctx, runID, after)
	return f, errs.Wrap(op, err)
}

// Cancel cancels run runID of the caller's chat or workflow and returns
// it. NotFound, Forbidden, Invalid RUN_NOT_ACTIVE when the run has
// finished.
func (s *Service) Cancel(ctx context.Context, sc Scope, runID string) (workflow.Run, error) {
	const op = "workflow.CancelRun"
	r, err := s.inScope(ctx, op, sc, runID)
	if err != nil {
		return workflow.Run{}, err
	}
	c, err := s.cancel(ctx, op, r)
	if err != nil {
		return workflow.Run{}, err
	}
	return s.forClient(ctx, c)
}

// CancelRun cancels run runID if it is still active, checking no owner
// (the chat stream cancels the run it renders when its reply is stopped).
// Invalid RUN_NOT_ACTIVE when it has finished.
func (s *Service) CancelRun(ctx context.Context, runID string) error {
	const op = "workflow.CancelRun"
	r, err := s.store.Run(ctx, runID)
	if err != nil {
		return errs.Wrap(op, err)
	}
	_, err = s.cancel(ctx, op, r)
	return err
}

// cancel cancels r, read again once if it moved on meanwhile. A waiting
// run, which no runner holds, is cancelled with a checkpoint that ends
// its log.
func (s *Service) cancel(ctx context.Context, op string, r workflow.Run) (workflow.Run, error) {
	for attempt := 0; ; attempt++ {
		if !workflow.Active(r.Status) {
			return workflow.Run{}, errs.E(op, errs.Invalid, workflow.CodeRunNotActive, "the workflow run is already "+r.Status)
		}
		var (
			c   workflow.Run
			err error
		)
		if r.Status == workflow.RunWaiting {
			c, err = s.cancelWaiting(ctx, r.ID)
		} else {
			c, err = s.store.CancelRun(ctx, r, s.now().UTC())
		}
		if errs.CodeOf(err) != workflow.CodeRunStateChanged || attempt > 0 {
			return c, errs.Wrap(op, err)
		}
		// It moved on meanwhile (started running, or finished): look again.
		if r, err = s.store.Run(ctx, r.ID); err != nil {
			return workflow.Run{}, errs.Wrap(op, err)
		}
	}
}

// cancelWaiting cancels waiting run runID (read again with its log's
// head) with one checkpoint conditioned on it still waiting. Conflict
// RUN_STATE_CHANGED when it moved on.
func (s *Service) cancelWaiting(ctx context.Context, runID string) (workflow.Run, error) {
	run, head, err := s.store.LoggedRun(ctx, runID)
	if err != nil {
		return workflow.Run{}, err
	}
	if run.Status != workflow.RunWaiting {
		return workflow.Run{}, errs.E("workflow.CancelRun", errs.Conflict, workflow.CodeRunStateChanged, "the workflow run changed state")
	}
	l := newRunLog(s.store, run, head.LastSeq, s.lease, s.now)
	l.ended, l.values = s.ended, s.runValues(run.ID)
	workflow.CancelRun(&run, s.now())
	return run, l.SaveRun(ctx, run, workflow.RunWaiting)
}

// Answer is a person's answer to a human step.
type Answer struct {
	Approved bool
	// Values are checked against the step's inputSchema, when it has
	// one (its defaults applied). A rejection (Approved false) needs
	// none: nil or empty values (what a form sends when nothing was
	// filled) are then recorded as {} unchecked, so that a person says no
	// without filling the fields an approval requires; values given with
	// a rejection are checked all the same.
	Values map[string]any
}

// Respond answers the waiting human step stepID of run runID of the
// caller's chat or workflow: the step completes with the answer as its
// output (approved, values, respondedAt, timedOut false), the run is
// running again, and it is handed to the runner, which goes on with the
// next step. It returns the run as recorded. Errors: NotFound
// (CHAT_NOT_FOUND, WORKFLOW_NOT_FOUND, RUN_NOT_FOUND, STEP_NOT_FOUND),
// Forbidden, Conflict STEP_NOT_WAITING (the step is not waiting, or was
// answered, timed out or cancelled meanwhile), Invalid INVALID_INPUT for
// values the step's inputSchema refuses (one detail per field,
// values.<name>; a rejection without values, or with {}, is not checked),
// Unavailable when the step's request, kept in the blob store when large,
// cannot be read now, Internal when it is lost: an answer is never taken
// unchecked. A runner that cannot be reached is not an error: the
// sweeper hands the run over once its lease expires.
func (s *Service) Respond(ctx context.Context, sc Scope, runID, stepID string, a Answer) (workflow.Run, error) {
	const op = "workflow.RespondStep"
	if _, err := s.inScope(ctx, op, sc, runID); err != nil {
		return workflow.Run{}, err
	}
	run, head, err := s.store.LoggedRun(ctx, runID)
	if err != nil {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	i := slices.IndexFunc(run.Steps, func(st workflow.RunStep) bool { return st.ID == stepID })
	if i < 0 {
		return workflow.Run{}, errs.E(op, errs.NotFound, "STEP_NOT_FOUND", fmt.Sprintf("the workflow run has no step %q", stepID))
	}
	rs := run.Steps[i]
	if rs.Reason == workflow.WaitAuthorization {
		return workflow.Run{}, errs.E(op, errs.Conflict, workflow.CodeStepNotWaiting, fmt.Sprintf("step %s waits for the authorization of an MCP server (%s), not for an answer", stepID, rs.AuthorizationURL))
	}
	if run.Status != workflow.RunWaiting || rs.Status != workflow.StepWaiting {
		return workflow.Run{}, errs.E(op, errs.Conflict, workflow.CodeStepNotWaiting, fmt.Sprintf("step %s is %s, not waiting for an answer", stepID, rs.Status))
	}
	values := a.Values
	rejectedBare := len(values) == 0 && !a.Approved
	if values == nil {
		values = map[string]any{}
	}
	// The request as the step resolved it, whole: a large one is kept
	// spilled. An answer is never taken unchecked because the request
	// could not be read.
	input, err := s.runValues(run.ID).whole(ctx, rs.Input)
	if errs.Is(err, errs.Unavailable) {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	if err != nil {
		return workflow.Run{}, errs.E(op, errs.Internal, "", "internal error").WithCause(fmt.Errorf("the waiting step %s's request: %w", stepID, err))
	}
	req, err := workflow.ParseHumanRequest(input)
	if err != nil {
		return workflow.Run{}, errs.E(op, errs.Internal, "", "internal error").WithCause(fmt.Errorf("the waiting step %s's request: %w", stepID, err))
	}
	if len(req.InputSchema) > 0 && !rejectedBare {
		schema, err := inputschema.Check(req.InputSchema)
		if err != nil {
			return workflow.Run{}, errs.E(op, errs.Invalid, "INVALID_INPUT_SCHEMA", "the step's inputSchema "+err.Error())
		}
		if values, err = schema.ValidateField("values", values); err != nil {
			return workflow.Run{}, errs.Wrap(op, err)
		}
	}
	now := s.now().UTC()
	l := newRunLog(s.store, run, head.LastSeq, s.lease, s.now)
	l.values = s.runValues(run.ID)
	answer(&run, i, workflow.HumanAnswer{Approved: a.Approved, Values: values, RespondedAt: now}, now)
	if err := l.SaveRun(ctx, run, workflow.RunWaiting); err != nil {
		if errs.CodeOf(err) == workflow.CodeRunStateChanged {
			return workflow.Run{}, errs.E(op, errs.Conflict, workflow.CodeStepNotWaiting, fmt.Sprintf("step %s is no longer waiting for an answer", stepID))
		}
		return workflow.Run{}, errs.Wrap(op, err)
	}
	tracing.LinkRun(ctx, run.ID)
	if err := s.invoker.Invoke(ctx, workflow.RunRef{RunID: run.ID, Attempt: run.Attempt}); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "hand the answered run to the runner; the sweeper will", "runId", run.ID, "err", err.Error())
	}
	return s.forClient(ctx, run)
}

// answer completes waiting step i of run with a and makes the run
// running again.
func answer(run *workflow.Run, i int, a workflow.HumanAnswer, now time.Time) {
	rs := &run.Steps[i]
	rs.Status, rs.Output, rs.CompletedAt, rs.ExpiresAt = workflow.StepCompleted, a.Output(), &now, nil
	run.Status = workflow.RunRunning
}

// Retry starts a new durable run that retries run runID of the caller's
// chat or workflow from step fromStepID, or (empty) from its first step that
// did not complete: the steps before it are completed with reused: true
// and the retried run's outputs, and the rest run asynchronously, as the
// retried run's snapshot of its steps says; it belongs to the chat of the
// retried run, if any. Errors: NotFound (CHAT_NOT_FOUND,
// WORKFLOW_NOT_FOUND, RUN_NOT_FOUND), Forbidden, Conflict RUN_ACTIVE when the
// run, or the latest retry of its chain of retries, is still active (or
// another retry in the chain started meanwhile), RateLimited RATE_LIMITED (see Start), Invalid RUN_NOT_RETRYABLE (completed without
// fromStepID, or recorded without a snapshot), Invalid VALIDATION_FAILED
// for a fromStepID that is not a step of the run or comes after a step
// that did not complete.
func (s *Service) Retry(ctx context.Context, sc Scope, runID, fromStepID string) (workflow.Run, error) {
	const op = "workflow.RetryRun"
	orig, err := s.inScope(ctx, op, sc, runID) // as stored: spilled values keep their keys
	if err != nil {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	if err := s.runValues(orig.ID).plan(ctx, &orig); err != nil {
		return workflow.Run{}, errs.Wrap(op, err)
	}
	if workflow.Active(orig.Status) {
		return workflow.Run{}, errs.E(op, errs.Conflict, workflow.CodeRunActive, "the workflow run is still "+orig.Status+"; cancel it first")
	}
	// One retry at a time in a chain of retries (a second click, or a
	// retry of an older run of the chain, does not run the steps twice
	// at once): the chain's root names the latest.
	root := orig
	if orig.RetryRoot != "" {
		switch r, err := s.store.Run(ctx, orig.RetryRoot); {
		case err == nil:
			root = r
		case !errs.Is(err, errs.NotFound):
			return workflow.Run{}, errs.Wrap(op, err)
		}
	}
	if root.LatestRetry != "" {
		prev, err := s.store.Run(ctx, root.LatestRetry)
		switch {
		case err == nil && workflow.Active(prev.Status):
			return workflow.Run{}, errs.E(op, errs.Conflict, workflow.CodeRunActive,
				"a retry of this workflow run ("+prev.ID+") is still "+prev.Status+"; cancel it first")
		case err != nil && !errs.Is(err, errs.NotFound):
			return workflow.Run{}, errs.Wrap(op, err)
		}
	}
	if len(orig.Plan) != len(orig.Steps) {
		return workflow.Run{}, errs.E(op, errs.Invalid, workflow.CodeRunNotRetryable, "the workflow run was recorded without a snapshot of its steps")
	}
	from := slices.IndexFunc(orig.Steps, func(st workflow.RunStep) bool { return st.Status != workflow.StepCompleted })
	if from < 0 {
		from = len(orig.Steps)
	}
	if fromStepID != "" {
		i := slices.IndexFunc(orig.Steps, func(st workflow.RunStep) bool { return st.ID == fromStepID })
		if i < 0 || i > from {
			var f errs.FieldErrors
			if i < 0 {
				f.Add("fromStepId", "is not a step of the run")
			} else {
				f.Add("fromStepId", "comes after step %s, which did not complete", orig.Steps[from].ID)
			}
			return workflow.Run{}, f.Err(op)
		}
		from = i
	}
	if from == len(orig.Steps) {
		return workflow.Run{}, errs.E(op, errs.Invalid, workflow.CodeRunNotRetryable, "the workflow run completed; give fromStepId to run steps again")
	}
	run := workflow.Run{ID: uuid.NewString(), ChatID: orig.ChatID, WorkflowID: orig.WorkflowID, UserID: auth.UserID(ctx),
		Status: workflow.RunPending, StartedAt: s.now().UTC(), Attempt: 1, WorkflowVersion: orig.WorkflowVersion,
		RetryOf: orig.ID, RetryRoot: root.ID, Plan: orig.Plan, PlanRef: orig.PlanRef, Steps: make([]workflow.RunStep, len(orig.Steps)), Input: orig.Input,
		Trigger: &workflow.Trigger{Type: workflow.TriggerManual}}
	for i, st := range orig.Steps {
		if i < from {
			st.Reused = true
			run.Steps[i] = st
			continue
		}
		run.Steps[i] = workflow.RunStep{ID: st.ID, ToolID: st.ToolID, Status: workflow.StepPending}
	}
	return run, s.launch(ctx, op, run, &root.LatestRetry)
}

// Page is a page of runs and the cursor of the next one, empty on the
// last page.
type Page struct {
	Runs []workflow.Run
	Next string
}

// List returns a page of at most limit runs of the caller's chat (oldest
// first) or workflow (newest first, whatever started them), after cursor
// (empty: the first page). NotFound CHAT_NOT_FOUND or WORKFLOW_NOT_FOUND,
// Forbidden, Invalid INVALID_PAGINATION for a bad cursor.
func (s *Service) List(ctx context.Context, sc Scope, limit int, cursor string) (Page, error) {
	const op = "workflow.ListRuns"
	owner, err := s.owner(ctx, sc)
	if err != nil {
		return Page{}, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, owner); err != nil {
		return Page{}, err
	}
	var (
		runs []workflow.Run
		next string
	)
	if sc.ChatID != "" {
		runs, next, err = s.store.ChatRunsPage(ctx, sc.ChatID, limit, cursor)
	} else {
		runs, next, err = s.store.WorkflowRunsPage(ctx, sc.WorkflowID, limit, cursor)
	}
	if err != nil {
		return Page{}, errs.Wrap(op, err)
	}
	for i := range runs {
		if runs[i], err = s.forClient(ctx, runs[i]); err != nil {
			return Page{}, err
		}
	}
	return Page{Runs: runs, Next: next}, nil
}

// ForChat is s as a chat's stream uses the run engine (chat.Runs): runs
// in a chat, without input, followed from their first event.
type ForChat struct{ *Service }

// Start starts a run of the caller's workflowID in chatID (see
// Service.Start).
func (c ForChat) Start(ctx context.Context, chatID, workflowID string) (workflow.Run, error) {
	return c.Service.Start(ctx, StartRequest{ChatID: chatID, WorkflowID: workflowID})
}

// CheckStart checks that a run of workflowID can start without input
// (see Service.CheckStart).
func (c ForChat) CheckStart(ctx context.Context, workflowID string) (workflow.Workflow, error) {
	return c.Service.CheckStart(ctx, workflowID, nil)
}

// Follow yields the run's events from its first (see Service.Follow).
func (c ForChat) Follow(ctx context.Context, runID string, yield func(workflow.RunEvent) error) error {
	return c.Service.Follow(ctx, runID, 0, yield)
}
