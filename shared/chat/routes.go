package chat

import (
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/ratelimit"
)

// Limits are the per-user rate limits of the chat routes that call a
// model. The zero value, like passing none, limits nothing (a nil Limiter).
type Limits struct {
	Limiter *ratelimit.Limiter
	// Messages limits POST /api/chats/{chatId}/messages.
	Messages ratelimit.Rule
	// Streams limits POST /api/chats/{chatId}/messages/stream.
	Streams ratelimit.Rule
	// Resumes limits GET /api/chats/{chatId}/messages/stream (a browser
	// EventSource reconnects by itself: the rule must allow that).
	Resumes ratelimit.Rule
}

// Routes returns the handler of the chat endpoints (ChatsFunction). Every
// route requires a session; posting a message is rate limited per user by
// the Messages rule of l (checked after the session, before the body).
func Routes(s *Service, authn *auth.Service, l Limits) *httpapi.Router {
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats", authn.Require(handleCreate(s)))
	r.Handle("GET /api/chats/{chatId}", authn.Require(handleGet(s)))
	r.Handle("PATCH /api/chats/{chatId}", authn.Require(handleUpdate(s)))
	r.Handle("DELETE /api/chats/{chatId}", authn.Require(handleDelete(s)))
	r.Handle("GET /api/users/{userId}/chats", authn.Require(handleList(s)))
	r.Handle("POST /api/chats/{chatId}/messages", authn.Require(l.Limiter.Limit(l.Messages)(handleSend(s))))
	r.Handle("GET /api/chats/{chatId}/messages", authn.Require(handleMessages(s)))
	r.Handle("POST /api/chats/{chatId}/messages/{messageId}/stop", authn.Require(handleStop(s)))
	r.Handle("POST /api/chats/{chatId}/tool-calls/{toolCallId}/approve", authn.Require(handleDecide(s, true)))
	r.Handle("POST /api/chats/{chatId}/tool-calls/{toolCallId}/deny", authn.Require(handleDecide(s, false)))
	return r
}

// StreamRoutes returns the handler of the chat stream and its resume
// (StreamFunction, behind a function URL with response streaming), rate
// limited per user by the Streams and Resumes rules of l. ping is the silence after which a keep-alive
// comment is sent; zero means PingInterval.
func StreamRoutes(s *Service, authn *auth.Service, ping time.Duration, l Limits) *httpapi.Router {
	if ping <= 0 {
		ping = PingInterval
	}
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats/{chatId}/messages/stream", authn.Require(l.Limiter.Limit(l.Streams)(handleStream(s, ping))))
	r.Handle("GET /api/chats/{chatId}/messages/stream", authn.Require(l.Limiter.Limit(l.Resumes)(handleResume(s, ping))))
	return r
}
