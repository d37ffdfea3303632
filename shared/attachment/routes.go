package attachment

import (
	"net/http"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/ratelimit"
)

// Limits are the rate limits of the attachment routes.
type Limits struct {
	Limiter *ratelimit.Limiter
	// Create limits POST /api/chats/{chatId}/attachments per user
	// (RATE_LIMIT_ATTACHMENTS).
	Create ratelimit.Rule
}

// Routes returns the attachment routes (ChatsFunction): create, get and
// delete an attachment of a chat, each behind a session.
func Routes(s *Service, authn *auth.Service, l Limits) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats/{chatId}/attachments", authn.Require(l.Limiter.Limit(l.Create)(handleCreate(s))))
	r.Handle("GET /api/chats/{chatId}/attachments/{attachmentId}", authn.Require(handleGet(s)))
	r.Handle("DELETE /api/chats/{chatId}/attachments/{attachmentId}", authn.Require(handleDelete(s)))
	return r
}

// handleCreate checks the path (400 INVALID_ID) before the body.
func handleCreate(s *Service) http.Handler {
	return httpapi.PathIDs(httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in CreateRequest) (Attachment, error) {
		return s.Create(r.Context(), r.PathValue("chatId"), in)
	}), "chatId")
}

// ids reads the chat and attachment ids of r's path (400 INVALID_ID).
func ids(r *http.Request) (string, string, error) {
	chatID, err := httpapi.PathUUID(r, "chatId")
	if err != nil {
		return "", "", err
	}
	id, err := httpapi.PathUUID(r, "attachmentId")
	return chatID, id, err
}

func handleGet(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Attachment, error) {
		chatID, id, err := ids(r)
		if err != nil {
			return Attachment{}, err
		}
		return s.Get(r.Context(), chatID, id)
	})
}

func handleDelete(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		chatID, id, err := ids(r)
		if err != nil {
			return httpapi.Empty{}, err
		}
		return httpapi.Empty{}, s.Delete(r.Context(), chatID, id)
	})
}
