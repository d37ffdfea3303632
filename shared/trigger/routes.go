package trigger

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/oauth"
	"github.com/workflowchat/service/shared/webhook"
)

// Routes returns the trigger endpoints (TriggersFunction): the CRUD
// routes under /api/workflows/{workflowId}/triggers, behind the session,
// and the webhook route POST /hooks/{triggerId}, which takes no session:
// the trigger's signature authorizes it. The webhook route is not a
// browser route: the standard middleware's rules let a server's request
// through (no Origin, Content-Type application/json or none).
func Routes(s *Service, authn *auth.Service) *httpapi.Router {
	r := httpapi.NewRouter()
	base := "/api/workflows/{workflowId}/triggers"
	r.Handle("POST "+base, authn.Require(withIDs(handleCreate(s))))
	r.Handle("GET "+base, authn.Require(withIDs(handleList(s))))
	r.Handle("GET "+base+"/{triggerId}", authn.Require(withIDs(handleGet(s))))
	r.Handle("PATCH "+base+"/{triggerId}", authn.Require(withIDs(handleUpdate(s))))
	r.Handle("DELETE "+base+"/{triggerId}", authn.Require(withIDs(handleDelete(s))))
	r.Handle("POST "+base+"/{triggerId}/rotate-secret", authn.Require(withIDs(handleRotate(s))))
	r.Handle("POST /hooks/{triggerId}", handleHook(s))
	return r
}

// View is a trigger as the API shows it. A webhook trigger's secret is
// only in the answers of create and rotate-secret.
type View struct {
	ID         string         `json:"id"`
	WorkflowID string         `json:"workflowId"`
	Type       string         `json:"type"`
	Enabled    bool           `json:"enabled"`
	Schedule   string         `json:"schedule,omitempty"`
	Timezone   string         `json:"timezone,omitempty"`
	Input      map[string]any `json:"input,omitempty"`
	Overlap    string         `json:"overlap,omitempty"`
	// Version is the workflow's version the trigger's runs run, when
	// pinned.
	Version int `json:"version,omitempty"`
	// NextFireAt is a schedule's next fire, when it is enabled and fires
	// again.
	NextFireAt *time.Time `json:"nextFireAt,omitempty"`
	// URL is where a webhook trigger takes calls.
	URL    string `json:"url,omitempty"`
	Secret string `json:"secret,omitempty"`
	// PreviousSecretExpiresAt is when a rotated secret stops working.
	PreviousSecretExpiresAt *time.Time `json:"previousSecretExpiresAt,omitempty"`
	// ActiveRunID and BufferedRunID are the overlap markers: the run this
	// trigger started that is still active, and the fire waiting for it.
	ActiveRunID   string    `json:"activeRunId,omitempty"`
	BufferedRunID string    `json:"bufferedRunId,omitempty"`
	LastFire      *Fire     `json:"lastFire,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

// NewView returns t as the API shows it, with URLs under baseURL (scheme
// and host, no trailing slash) and now for the next fire.
func NewView(t Trigger, baseURL string, now time.Time) View {
	v := View{ID: t.ID, WorkflowID: t.WorkflowID, Type: t.Type, Enabled: t.Enabled, Schedule: t.Schedule, Timezone: t.Timezone,
		Input: t.Input, Overlap: t.Overlap, NextFireAt: NextFireAt(t, now), ActiveRunID: t.ActiveRunID, BufferedRunID: t.BufferedRunID,
		LastFire: t.LastFire, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Version: t.WorkflowVersion}
	if t.Type == TypeWebhook {
		v.URL = baseURL + "/hooks/" + t.ID
		if t.PreviousExpiresAt != nil && now.Before(*t.PreviousExpiresAt) {
			v.PreviousSecretExpiresAt = t.PreviousExpiresAt
		}
	}
	return v
}

type triggerList struct {
	Triggers []View `json:"triggers"`
}

// withIDs answers 400 INVALID_ID for a malformed workflowId or triggerId
// (when the route has one) before the body is read.
func withIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := httpapi.PathUUID(r, "workflowId"); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		if strings.Contains(r.Pattern, "{triggerId}") {
			if _, err := httpapi.PathUUID(r, "triggerId"); err != nil {
				httpapi.WriteError(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// view shows t with its webhook URL under the service's public origin
// (oauth.BaseURL: PUBLIC_BASE_URL, else the viewer's host), the origin
// the OAuth issuer and the MCP endpoint are named under too, not the host
// name the function was reached by.
func (s *Service) view(r *http.Request, t Trigger) View {
	return NewView(t, oauth.BaseURL(s.baseURL, r), s.clock())
}

func handleCreate(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in CreateRequest) (View, error) {
		c, err := s.Create(r.Context(), r.PathValue("workflowId"), in)
		if err != nil {
			return View{}, err
		}
		v := s.view(r, c.Trigger)
		v.Secret = c.Secret
		return v, nil
	})
}

func handleList(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (triggerList, error) {
		ts, err := s.List(r.Context(), r.PathValue("workflowId"))
		if err != nil {
			return triggerList{}, err
		}
		out := triggerList{Triggers: make([]View, 0, len(ts))}
		for _, t := range ts {
			out.Triggers = append(out.Triggers, s.view(r, t))
		}
		return out, nil
	})
}

func handleGet(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (View, error) {
		t, err := s.Get(r.Context(), r.PathValue("workflowId"), r.PathValue("triggerId"))
		return s.view(r, t), err
	})
}

func handleUpdate(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in UpdateRequest) (View, error) {
		t, err := s.Update(r.Context(), r.PathValue("workflowId"), r.PathValue("triggerId"), in)
		return s.view(r, t), err
	})
}

func handleDelete(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		return httpapi.Empty{}, s.Delete(r.Context(), r.PathValue("workflowId"), r.PathValue("triggerId"))
	})
}

// handleRotate takes an optional body (RotateRequest).
func handleRotate(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := httpapi.DecodeOptional[RotateRequest](r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		c, err := s.RotateSecret(r.Context(), r.PathValue("workflowId"), r.PathValue("triggerId"), in)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		v := s.view(r, c.Trigger)
		v.Secret = c.Secret
		httpapi.Respond(w, http.StatusOK, v)
	})
}

type hookAnswer struct {
	RunID string `json:"runId"`
}

// handleHook is POST /hooks/{triggerId}: 202 with the run started, 200
// with the same run for a repeated call.
func handleHook(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const op = "trigger.handleHook"
		id, err := httpapi.PathUUID(r, "triggerId")
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		if r.ContentLength > MaxWebhookBody {
			httpapi.WriteError(w, r, httpapi.BodyTooLarge(op, MaxWebhookBody))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
		if err != nil {
			// A body past the limit is 413 naming it (httpapi.WriteError).
			httpapi.WriteError(w, r, errs.E(op, errs.Invalid, "INVALID_BODY", "could not read the request body").WithCause(err))
			return
		}
		// The Lambda HTTP adapter splits header values at commas (API
		// Gateway joins repeated headers with them): join them back.
		out, err := s.Hook(r.Context(), HookRequest{TriggerID: id, Signature: strings.Join(r.Header.Values(webhook.Header), ","),
			IdempotencyKey: strings.Join(r.Header.Values("Idempotency-Key"), ","), Body: body})
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		status := http.StatusAccepted
		if out.Repeat {
			status = http.StatusOK
		}
		httpapi.Respond(w, status, hookAnswer{RunID: out.RunID})
	})
}
