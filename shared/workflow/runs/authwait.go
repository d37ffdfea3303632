package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/workflow"
)

// Authorization waits: a step whose remote tool answers that its server
// needs the user's authorization (the error's cause names the server:
// AuthorizationServerID) does not fail. In one write the step and the
// run are recorded waiting, with reason authorization, the server's id,
// the route that starts its authorization and a deadline
// (AuthorizationTimeout after the step first waited); no runner holds the
// run. Before that write a small wait item (AuthWaits: user, server,
// run) is stored, so that the authorization's success, on any instance,
// finds the runs waiting for it (Service.Authorized): each goes back to
// the runner, its step pending, and calls its tool again. Every write
// that could be lost to a crash is made good by the sweeper: a waiting
// run's lease expires every AuthCheck, when the sweeper hands it to the
// runner to call its tool again (an authorization whose word was lost
// resumes it then; a server still unauthorized waits again, keeping its
// deadline); once the deadline has passed, the step fails
// AUTHORIZATION_TIMEOUT. A cancel ends the wait as any wait's; the wait
// item it leaves is dropped by the next authorization or by the table's
// TTL. A forEach step waits the same way once an element's call needs
// the authorization: the calls already running finish and are recorded
// (each element's output is its own write), no other element starts,
// and once authorized the step runs only the elements with no recorded
// output, so that none runs twice.

// AuthorizationTimeout is how long a step waits for the authorization of
// its remote server (docs/limits.md).
const AuthorizationTimeout = 24 * time.Hour

// AuthCheck is how often the sweeper has a run waiting for an
// authorization call its tool again.
const AuthCheck = 5 * time.Minute

// CodeAuthorizationTimeout is the error of a step whose server was not
// authorized within AuthorizationTimeout.
const CodeAuthorizationTimeout = "AUTHORIZATION_TIMEOUT"

// AuthWait is a run waiting for the authorization of a user's server
// (kept in package workflow, which the store links without this one).
type AuthWait = workflow.AuthWait

// AuthWaits keeps the wait items (store.Runs).
type AuthWaits interface {
	// PutAuthWait stores w (again: the same item).
	PutAuthWait(ctx context.Context, w AuthWait) error
	// AuthWaits returns the wait items of userID's server serverID, at
	// most MaxAuthWaits.
	AuthWaits(ctx context.Context, userID, serverID string) ([]AuthWait, error)
	// DeleteAuthWait removes w (no error when it is gone).
	DeleteAuthWait(ctx context.Context, w AuthWait) error
}

// MaxAuthWaits bounds the runs one authorization continues at once (the
// others go on at the sweeper's next AuthCheck).
const MaxAuthWaits = workflow.MaxAuthWaits

// AuthorizeURL is the authorizationUrl a waiting step shows: the API
// route that starts the server's authorization (POST; it answers the URL
// the browser opens). It holds no secret.
func AuthorizeURL(serverID string) string { return "/api/mcp-servers/" + serverID + "/authorize" }

// authServer returns the server err says needs the user's authorization.
func authServer(err error) (string, bool) {
	var n interface{ AuthorizationServerID() string }
	if errors.As(err, &n) && n.AuthorizationServerID() != "" {
		return n.AuthorizationServerID(), true
	}
	return "", false
}

// authServerOf is authServer's server, or "".
func authServerOf(err error) string {
	id, _ := authServer(err)
	return id
}

// halted reports whether c is closed.
func halted(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// waitAuth records step i and the run waiting for the authorization of
// serverID: the wait item first (a crash after it leaves an item that
// finds no run waiting), then the run's write. deadline is the step's
// when it waited before (kept), else now plus AuthorizationTimeout.
func (x *execution) waitAuth(ctx context.Context, op string, i int, serverID string, deadline *time.Time) error {
	rs := &x.run.Steps[i]
	now := x.e.clock()
	if deadline == nil || deadline.IsZero() {
		t := now.Add(AuthorizationTimeout)
		deadline = &t
	}
	if x.e.authWaits != nil {
		w := AuthWait{UserID: x.run.UserID, ServerID: serverID, RunID: x.run.ID, ExpiresAt: deadline.Add(time.Hour)}
		if err := x.e.authWaits.PutAuthWait(ctx, w); err != nil {
			return x.unrecorded(ctx, op, err)
		}
	}
	rs.Status, rs.Reason, rs.MCPServerID, rs.AuthorizationURL, rs.ExpiresAt = workflow.StepWaiting, workflow.WaitAuthorization, serverID, AuthorizeURL(serverID), deadline
	x.run.Status = workflow.RunWaiting
	x.paused = true
	if err := x.store(ctx); err != nil {
		rs.Status, rs.Reason, rs.MCPServerID, rs.AuthorizationURL, rs.ExpiresAt = workflow.StepRunning, "", "", "", nil
		x.run.Status = workflow.RunRunning
		x.paused = false
		return x.stopped(ctx, op, err)
	}
	return nil
}

// authStep returns the index of run's step waiting for an authorization,
// or -1.
func authStep(run workflow.Run) int {
	return slices.IndexFunc(run.Steps, func(s workflow.RunStep) bool {
		return s.Status == workflow.StepWaiting && s.Reason == workflow.WaitAuthorization
	})
}

// unwait makes step i of run, waiting for an authorization, pending again
// (its deadline and reason kept, for its next wait) and the run running;
// the time it waited, to now, is added to its AuthorizationWaitedMs.
func unwait(run *workflow.Run, i int, now time.Time) {
	rs := &run.Steps[i]
	if rs.StartedAt != nil && now.After(*rs.StartedAt) {
		rs.AuthorizationWaitedMs += now.Sub(*rs.StartedAt).Milliseconds()
	}
	rs.Status, rs.StartedAt, rs.MCPServerID, rs.AuthorizationURL = workflow.StepPending, nil, "", ""
	run.Status = workflow.RunRunning
}

// authDue handles a run waiting for an authorization whose lease ended:
// past the step's deadline the step fails AUTHORIZATION_TIMEOUT (the run
// too, unless the step continues on error); before it, the run goes to
// the runner to call the tool again. Each write is conditioned on the
// run still waiting.
func authDue(ctx context.Context, invoker workflow.Invoker, l *runLog, run workflow.Run, i int, now time.Time) error {
	rs := &run.Steps[i]
	if rs.ExpiresAt != nil && !now.Before(*rs.ExpiresAt) {
		waited := AuthorizationTimeout
		if rs.StartedAt != nil {
			waited = rs.ExpiresAt.Sub(*rs.StartedAt).Round(time.Second)
		}
		rs.ExpiresAt = nil
		settle(&run, i, nil, fmt.Sprintf("%s: the MCP server %s was not authorized within %s", CodeAuthorizationTimeout, rs.MCPServerID, waited), now.UTC())
		if err := l.SaveRun(ctx, run, workflow.RunWaiting); err != nil || !workflow.Active(run.Status) {
			return ignoreConflict(err)
		}
		return invoker.Invoke(ctx, workflow.RunRef{RunID: run.ID, Attempt: run.Attempt})
	}
	unwait(&run, authStep(run), now)
	if err := l.SaveRun(ctx, run, workflow.RunWaiting); err != nil {
		return ignoreConflict(err)
	}
	return invoker.Invoke(ctx, workflow.RunRef{RunID: run.ID, Attempt: run.Attempt})
}

// Authorized continues every run of userID waiting for the authorization
// of server serverID (the mcpserver service's OnConnected): each, still
// waiting for it, has its step made pending again in one write
// conditioned on the run still waiting, and goes to the runner; the wait
// items are removed. It returns the first error; what it could not do
// the sweeper does.
func (s *Service) Authorized(ctx context.Context, userID, serverID string) error {
	const op = "runs.Authorized"
	if s.authWaits == nil {
		return nil
	}
	waits, err := s.authWaits.AuthWaits(ctx, userID, serverID)
	if err != nil {
		return errs.Wrap(op, err)
	}
	var failed error
	for _, w := range waits {
		if err := s.authorized(ctx, w); err != nil {
			logging.FromContext(ctx).WarnContext(ctx, "continue a run waiting for an authorization; the sweeper will", "runId", w.RunID, "err", err.Error())
			if failed == nil {
				failed = errs.Wrap(op, err)
			}
			continue
		}
		if err := s.authWaits.DeleteAuthWait(ctx, w); err != nil && failed == nil {
			failed = errs.Wrap(op, err)
		}
	}
	return failed
}

// stillWaiting reads w's run with its log's head; ok is false (and err
// nil) when the run is gone or no longer waits for w's server.
func stillWaiting(ctx context.Context, st Store, w AuthWait) (workflow.Run, job.Head, bool, error) {
	run, head, err := st.LoggedRun(ctx, w.RunID)
	if errs.Is(err, errs.NotFound) {
		return workflow.Run{}, job.Head{}, false, nil
	}
	if err != nil {
		return workflow.Run{}, job.Head{}, false, err
	}
	i := authStep(run)
	if run.UserID != w.UserID || run.Status != workflow.RunWaiting || !head.Active || i < 0 || run.Steps[i].MCPServerID != w.ServerID {
		return workflow.Run{}, job.Head{}, false, nil
	}
	return run, head, true, nil
}

// authorized continues the run of w if it still waits for w's server.
func (s *Service) authorized(ctx context.Context, w AuthWait) error {
	run, head, ok, err := stillWaiting(ctx, s.store, w)
	if !ok || err != nil {
		return err
	}
	l := newRunLog(s.store, run, head.LastSeq, s.lease, s.now)
	l.values = s.runValues(run.ID)
	unwait(&run, authStep(run), s.now())
	if err := l.SaveRun(ctx, run, workflow.RunWaiting); err != nil {
		return ignoreConflict(err)
	}
	if err := s.invoker.Invoke(ctx, workflow.RunRef{RunID: run.ID, Attempt: run.Attempt}); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "hand an authorized run to the runner; the sweeper will", "runId", run.ID, "err", err.Error())
	}
	return nil
}

// minTime is the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// AuthResumer continues the runs waiting for an authorization where no
// runner can be reached (the function serving the OAuth callback): each
// run still waiting for the server has its lease ended now, in one write
// conditioned on the run still waiting, so that the sweeper's next pass
// (within a minute) hands it to the runner (authDue), on its same
// attempt. Now nil means time.Now.
type AuthResumer struct {
	Store     Store
	AuthWaits AuthWaits
	Now       func() time.Time
}

// Authorized is Service.Authorized for r: the wait items of userID's
// server serverID are read, each run still waiting for it made due, and
// the items removed. It returns the first error.
func (r AuthResumer) Authorized(ctx context.Context, userID, serverID string) error {
	const op = "runs.AuthResumer"
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	waits, err := r.AuthWaits.AuthWaits(ctx, userID, serverID)
	if err != nil {
		return errs.Wrap(op, err)
	}
	var failed error
	for _, w := range waits {
		err := r.due(ctx, w, now())
		if err == nil {
			err = r.AuthWaits.DeleteAuthWait(ctx, w)
		}
		if err != nil && failed == nil {
			failed = errs.Wrap(op, err)
		}
	}
	return failed
}

// due ends the lease of w's run when it still waits for w's server.
func (r AuthResumer) due(ctx context.Context, w AuthWait, now time.Time) error {
	run, _, ok, err := stillWaiting(ctx, r.Store, w)
	if !ok || err != nil {
		return err
	}
	err = r.Store.SaveCheckpoint(ctx, workflow.Checkpoint{Run: run, IfStatus: workflow.RunWaiting, LeaseUntil: now})
	return ignoreConflict(err)
}
