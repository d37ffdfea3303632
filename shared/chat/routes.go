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
	r.Handle("GET /api/users/{userId}/chats", authn.Require(auth.SelfPath(handleList(s))))
	r.Handle("POST /api/chats/{chatId}/messages", authn.Require(l.Limiter.Limit(l.Messages)(handleSend(s))))
	r.Handle("GET /api/chats/{chatId}/messages", authn.Require(handleMessages(s)))
	r.Handle("POST /api/chats/{chatId}/messages/{messageId}/stop", authn.Require(handleStop(s)))
	r.Handle("POST /api/chats/{chatId}/tool-calls/{toolCallId}/approve", authn.Require(handleDecide(s, true)))
	r.Handle("POST /api/chats/{chatId}/tool-calls/{toolCallId}/deny", authn.Require(handleDecide(s, false)))
	r.Handle("POST /api/chats/{chatId}/shares", authn.Require(handleCreateShare(s)))
	r.Handle("GET /api/chats/{chatId}/shares", authn.Require(handleListShares(s)))
	r.Handle("DELETE /api/chats/{chatId}/shares/{shareId}", authn.Require(handleDeleteShare(s)))
	// A share is public: no session, any origin (nothing of a session is
	// read), limited per client address.
	r.HandleAccess("GET /api/shares/{shareId}", handleShared(s, l.Limiter), httpapi.Open)
	r.Handle("GET /api/chats/{chatId}/export", authn.Require(handleExport(s)))
	return r
}

// StreamRoutes returns the handler of the chat stream, its resume and the
// regenerate of a reply (StreamFunction, behind a function URL with
// response streaming), rate limited per user by the Streams and Resumes
// rules of l (a regenerate by Streams, or by Messages when it answers
// JSON). ping is the silence after which a keep-alive
// comment is sent; zero means PingInterval.
func StreamRoutes(s *Service, authn *auth.Service, ping time.Duration, l Limits) *httpapi.Router {
	if ping <= 0 {
		ping = PingInterval
	}
	r := httpapi.NewRouter()
	r.Handle("POST /api/chats/{chatId}/messages/stream", authn.Require(l.Limiter.Limit(l.Streams)(handleStream(s, ping))))
	r.Handle("GET /api/chats/{chatId}/messages/stream", authn.Require(l.Limiter.Limit(l.Resumes)(handleResume(s, ping))))
	// A regenerate answers as JSON or as the stream: it lives where the
	// stream can.
	r.Handle("POST /api/chats/{chatId}/messages/{messageId}/regenerate", authn.Require(handleRegenerate(s, ping, l)))
	return r
}
