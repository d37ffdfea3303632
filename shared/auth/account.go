package auth

import (
	"context"
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/audit"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// Deletions begins account deletions. store.Accounts implements it.
type Deletions interface {
	// BeginDeletion ends u's account in one write (its credential gone,
	// its profile marked) and queues the erasure of its data. NotFound
	// when the credential is already gone.
	BeginDeletion(ctx context.Context, u User, at time.Time) error
}

// Erasures tells whether an account's deletion has begun
// (store.DeletedAccounts implements it). The ways into an account's data
// that carry no session, which the deletion ended at once, check it: a
// share's public link, a trigger's schedule and webhook.
type Erasures interface {
	// Deleted reports whether userID's account is deleted or being
	// erased. Errors: storage's.
	Deleted(ctx context.Context, userID string) (bool, error)
}

// WithDeletions makes s able to delete accounts (DeleteAccount) through
// d. Call it while building the service.
func (s *Service) WithDeletions(d Deletions) *Service {
	s.deletions = d
	return s
}

var errWrongPassword = errs.E("auth.DeleteAccount", errs.Forbidden, "INVALID_CREDENTIALS", "the password is not this account's")

// DeleteAccount deletes the signed-in user's account once password is
// checked: from its return, the account cannot sign in (the email is free
// to sign up with again) and every session, OAuth grant and personal
// access token of the user has ended; the erasure of the user's data is
// queued (package account). Errors: Invalid VALIDATION_FAILED without a
// password; Forbidden INVALID_CREDENTIALS for a wrong one (recorded as a
// failed sign-in); Unauthenticated without a session or once the account
// is already deleted; Unavailable when the instance is busy hashing.
func (s *Service) DeleteAccount(ctx context.Context, password string) error {
	const op = "auth.DeleteAccount"
	sess, ok := FromContext(ctx)
	if !ok {
		return errNoSession
	}
	if password == "" {
		var f errs.FieldErrors
		f.Add("password", "is required")
		return f.Err(op)
	}
	if s.deletions == nil {
		return errs.E(op, errs.Unavailable, "SERVICE_UNAVAILABLE", "account deletion is not available")
	}
	u, hash, err := s.store.Credential(ctx, sess.User.Email)
	if errs.Is(err, errs.NotFound) || err == nil && u.ID != sess.User.ID {
		return errNoSession
	}
	if err != nil {
		return errs.Wrap(op, err)
	}
	release, err := s.acquireHashing(ctx)
	if err != nil {
		return errs.Wrap(op, err)
	}
	ok = s.hasher.Verify(hash, password)
	release()
	if !ok {
		s.audit.Record(ctx, u.ID, audit.SignInFailed, map[string]any{"method": "password", "action": "delete_account"})
		return errWrongPassword
	}
	if err := s.deletions.BeginDeletion(ctx, u, s.now().UTC()); err != nil {
		if errs.Is(err, errs.NotFound) {
			return errNoSession
		}
		return errs.Wrap(op, err)
	}
	s.audit.Record(ctx, u.ID, audit.DeletionRequested, nil)
	// The other credentials, then the sessions: from here the account
	// has no way in. The erasure ends them again, for any an eventually
	// consistent listing missed.
	for _, f := range s.signOutAll {
		if err := f(ctx, u.ID); err != nil {
			return errs.Wrap(op, err)
		}
	}
	if _, err := s.store.DeleteUserSessions(ctx, u.ID); err != nil {
		return errs.Wrap(op, err)
	}
	return nil
}

// DeleteAccountRequest is the body of DELETE /api/users/{userId}.
type DeleteAccountRequest struct {
	Password string `json:"password"`
}

// Validate requires the password, before the attempt is counted.
func (r DeleteAccountRequest) Validate() error {
	if r.Password == "" {
		var f errs.FieldErrors
		f.Add("password", "is required")
		return f.Err("auth.DeleteAccountRequest")
	}
	return nil
}

type deletionResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func handleDeleteAccount(s *Service, a Attempts) http.Handler {
	return httpapi.Endpoint(http.StatusAccepted, func(w http.ResponseWriter, r *http.Request, in DeleteAccountRequest) (deletionResponse, error) {
		sess, _ := FromContext(r.Context())
		// Counted as a sign-in: a stolen session cannot guess the
		// password here faster than at the sign-in form.
		if err := a.SignIn(r.Context(), sess.User.Email, ClientAddress(r)); err != nil {
			return deletionResponse{}, err
		}
		if err := s.DeleteAccount(r.Context(), in.Password); err != nil {
			return deletionResponse{}, err
		}
		ClearCookie(w, r)
		return deletionResponse{ID: sess.User.ID, Status: "pending"}, nil
	})
}

func handleAudit(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (audit.Page, error) {
		page, err := httpapi.ParseCursorPage(r)
		if err != nil {
			return audit.Page{}, err
		}
		if s.audit == nil {
			return audit.Page{Events: []audit.Event{}}, nil
		}
		return s.audit.List(r.Context(), r.PathValue("userId"), page.Limit, page.After)
	})
}
