package chat

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/sse"
)

type chatsPage struct {
	Chats []Chat `json:"chats"`
	Total int    `json:"total"`
}

func handleCreate(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in CreateRequest) (Chat, error) {
		return s.Create(r.Context(), in)
	})
}

func handleGet(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Chat, error) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return Chat{}, err
		}
		return s.Get(r.Context(), id)
	})
}

// handleUpdate checks the path (400 INVALID_ID) before the body.
func handleUpdate(s *Service) http.Handler {
	return httpapi.PathIDs(httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in UpdateRequest) (Chat, error) {
		return s.Update(r.Context(), r.PathValue("chatId"), in)
	}), "chatId")
}

func handleDelete(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return httpapi.Empty{}, err
		}
		return httpapi.Empty{}, s.Delete(r.Context(), id)
	})
}

func handleList(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (chatsPage, error) {
		page, err := httpapi.ParsePage(r)
		if err != nil {
			return chatsPage{}, err
		}
		archived := false
		if v := r.URL.Query().Get("archived"); v != "" {
			if archived, err = strconv.ParseBool(v); err != nil {
				return chatsPage{}, errs.Fields("chat.handleList", errs.FieldError{Field: "archived", Message: "must be true or false"})
			}
		}
		chats, total, err := s.List(r.Context(), r.PathValue("userId"), page, archived)
		return chatsPage{Chats: chats, Total: total}, err
	})
}

func handleMessages(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (MessageList, error) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return MessageList{}, err
		}
		leaf := r.URL.Query().Get("leaf")
		if r.URL.Query().Has("leaf") && !httpapi.IsUUID(leaf) {
			return MessageList{}, errs.Fields("chat.handleMessages", errs.FieldError{Field: "leaf", Message: "must be a message id (a UUID)"})
		}
		return s.ListMessages(r.Context(), id, leaf)
	})
}

// handleSend checks the path (400 INVALID_ID) before the body.
func handleSend(s *Service) http.Handler {
	return httpapi.PathIDs(httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in MessageRequest) (Exchange, error) {
		return s.Send(r.Context(), r.PathValue("chatId"), in)
	}), "chatId")
}

// handleStream answers with the reply as Server-Sent Events. Errors before
// the stream starts are plain JSON errors; later ones are error events.
// The reply is generated in a context detached from the client's (see
// Detach): a client that leaves does not stop it, and the handler returns
// when it is saved. Events reach the client through an sse.Queue, so a slow
// or vanished client never holds the generator up.
func handleStream(s *Service, ping time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		in, err := httpapi.Decode[StreamRequest](r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		turn, err := s.StartStream(r.Context(), id, in)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		runTurn(r, w, s, turn, ping)
	})
}

// handleRegenerate answers a regenerate: with Accept: text/event-stream
// as the stream does (limited by streams), else as JSON, 201 with the new
// reply (limited by messages). The path is checked (400 INVALID_ID)
// before the optional body.
func handleRegenerate(s *Service, ping time.Duration, l Limits) http.Handler {
	asJSON := l.Limiter.Limit(l.Messages)(httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Message, error) {
		in, err := httpapi.DecodeOptional[RegenerateRequest](r)
		if err != nil {
			return Message{}, err
		}
		return s.Regenerate(r.Context(), r.PathValue("chatId"), r.PathValue("messageId"), in)
	}))
	asStream := l.Limiter.Limit(l.Streams)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := httpapi.DecodeOptional[RegenerateRequest](r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		turn, err := s.StartRegenerate(r.Context(), r.PathValue("chatId"), r.PathValue("messageId"), in)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		runTurn(r, w, s, turn, ping)
	}))
	return httpapi.PathIDs(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			asStream.ServeHTTP(w, r)
			return
		}
		asJSON.ServeHTTP(w, r)
	}), "chatId", "messageId")
}

// runTurn generates turn's reply as the response's events (see
// handleStream).
func runTurn(r *http.Request, w http.ResponseWriter, s *Service, turn *Turn, ping time.Duration) {
	out := sse.NewWriter(w)
	stopPing := job.KeepAlive(r.Context(), out, ping)
	defer stopPing()
	q := sse.NewQueue(out)
	ctx, cancel := Detach(r.Context())
	defer cancel()
	if _, err := s.RunStream(ctx, turn, func(e Event) { q.Send(e.ID, e) }); err != nil {
		logging.FromContext(ctx).InfoContext(ctx, "reply ended early", "err", err.Error())
	}
	if err := q.Close(); err != nil {
		logging.FromContext(ctx).InfoContext(ctx, "the client left before the reply ended", "err", err.Error())
	}
}

// DecisionRequest is the optional body of POST
// .../tool-calls/{toolCallId}/approve: remember stores allow for the tool.
type DecisionRequest struct {
	Remember bool `json:"remember"`
}

// maxToolCallID bounds a tool call id in a path.
const maxToolCallID = 200

// handleDecide checks the path (400 INVALID_ID) before the optional body.
func handleDecide(s *Service, approve bool) http.Handler {
	return httpapi.PathIDs(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := httpapi.DecodeOptional[DecisionRequest](r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		callID := r.PathValue("toolCallId")
		if callID == "" || len(callID) > maxToolCallID {
			httpapi.WriteError(w, r, errs.E("chat.Decide", errs.Conflict, CodeToolCallNotPending, "this tool call is not waiting for a decision"))
			return
		}
		m, err := s.Decide(r.Context(), r.PathValue("chatId"), callID, approve, in.Remember)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		httpapi.Respond(w, http.StatusAccepted, m)
	}), "chatId")
}

// handleResume replays a reply's events after Last-Event-ID (or
// ?lastEventId=), or the chat's active reply from its start, then follows
// it until its end (job.Serve); 204 when no id is given and no reply is
// active. The follow ends with the client, or before the request's
// deadline: the client then resumes again.
func handleResume(s *Service, ping time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		last, err := job.LastEventID(r)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		res, err := s.Resume(r.Context(), id, last)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		switch {
		case res == nil:
			w.WriteHeader(http.StatusNoContent)
		case res.Continuation != nil:
			// A reply whose tool call was decided goes on here, in the
			// stream function, not in the request that decided it.
			runTurn(r, w, s, res.Continuation, ping)
		default:
			job.Serve(w, r, res.Follower, ping)
		}
	})
}

func handleStop(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Message, error) {
		chatID, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return Message{}, err
		}
		msgID, err := httpapi.PathUUID(r, "messageId")
		if err != nil {
			return Message{}, err
		}
		return s.Stop(r.Context(), chatID, msgID)
	})
}
