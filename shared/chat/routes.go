package chat

import (
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
)

// Routes returns the handler of the chat endpoints (ChatsFunction). Every
// route requires a session.
func Routes(s *Service, authn *auth.Service) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats", authn.Require(handleCreate(s)))
	r.Handle("GET /api/chats/{chatId}", authn.Require(handleGet(s)))
	r.Handle("PATCH /api/chats/{chatId}", authn.Require(handleUpdate(s)))
	r.Handle("DELETE /api/chats/{chatId}", authn.Require(handleDelete(s)))
	r.Handle("GET /api/users/{userId}/chats", authn.Require(handleList(s)))
	r.Handle("POST /api/chats/{chatId}/messages", authn.Require(handleSend(s)))
	r.Handle("GET /api/chats/{chatId}/messages", authn.Require(handleMessages(s)))
	return r
}

// StreamRoutes returns the handler of the chat stream (StreamFunction,
// behind a function URL with response streaming). ping is the silence
// after which a keep-alive comment is sent; zero means PingInterval.
func StreamRoutes(s *Service, authn *auth.Service, ping time.Duration) *httpapi.Router {
	if ping <= 0 {
		ping = PingInterval
	}
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats/{chatId}/messages/stream", authn.Require(handleStream(s, ping)))
	return r
}
