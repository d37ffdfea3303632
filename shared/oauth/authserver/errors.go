package authserver

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/workflowchat/service/shared/errs"
)

// oauthError is an error as OAuth answers it (RFC 6749 section 5.2, RFC
// 7591 section 3.2.2, RFC 8707 section 2): a registered code and a
// description for the developer.
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
	// status is the HTTP status of a JSON answer (0: 400).
	status int
	// retryAfter, in seconds, for a rate-limited request.
	retryAfter int
}

func (e oauthError) Error() string { return e.Code + ": " + e.Description }

func errInvalidRequest(desc string) oauthError {
	return oauthError{Code: "invalid_request", Description: desc}
}
func errInvalidGrant(desc string) oauthError {
	return oauthError{Code: "invalid_grant", Description: desc}
}
func errInvalidClient(desc string) oauthError {
	return oauthError{Code: "invalid_client", Description: desc, status: http.StatusUnauthorized}
}
func errInvalidTarget(desc string) oauthError {
	return oauthError{Code: "invalid_target", Description: desc}
}
func errServer() oauthError {
	return oauthError{Code: "server_error", Description: "internal error", status: http.StatusInternalServerError}
}

// writeOAuthError writes e as a JSON OAuth error with status (e's own
// when it has one).
func writeOAuthError(w http.ResponseWriter, status int, e oauthError) {
	if e.status != 0 {
		status = e.status
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	if e.Code == "invalid_client" {
		w.Header().Set("WWW-Authenticate", `Basic realm="oauth"`)
	}
	writeJSON(w, status, e)
}

// retryAfterOf is the Retry-After, in seconds, of a rate-limit error (0
// when it names none).
func retryAfterOf(err error) int {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// fromServiceError turns a service error (storage, rate limit) into the
// OAuth error a client should see.
func fromServiceError(err error) oauthError {
	switch errs.KindOf(err) {
	case errs.RateLimited:
		return oauthError{Code: "slow_down", Description: errs.MessageOf(err, "too many requests"), status: http.StatusTooManyRequests,
			retryAfter: retryAfterOf(err)}
	case errs.Unavailable:
		return oauthError{Code: "temporarily_unavailable", Description: "the service is busy; retry shortly", status: http.StatusServiceUnavailable, retryAfter: 1}
	}
	return errServer()
}
