package chat

import (
	"context"
	"net/http"
	"time"

	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/sse"
)

type chatsPage struct {
	Chats []Chat `json:"chats"`
	Total int    `json:"total"`
}

type messagesList struct {
	Messages []Message `json:"messages"`
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

func handleUpdate(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in UpdateRequest) (Chat, error) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return Chat{}, err
		}
		return s.Update(r.Context(), id, in)
	})
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
		chats, total, err := s.List(r.Context(), r.PathValue("userId"), page)
		return chatsPage{Chats: chats, Total: total}, err
	})
}

func handleMessages(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (messagesList, error) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return messagesList{}, err
		}
		msgs, err := s.Messages(r.Context(), id)
		return messagesList{Messages: msgs}, err
	})
}

func handleSend(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in MessageRequest) (Exchange, error) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return Exchange{}, err
		}
		return s.Send(r.Context(), id, in)
	})
}

// handleStream answers with the reply as Server-Sent Events. Errors before
// the stream starts are plain JSON errors; later ones are error events.
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
		out := sse.NewWriter(w)
		ctx, stop := context.WithCancel(r.Context())
		pinging := make(chan struct{})
		go func() { defer close(pinging); out.KeepAlive(ctx, ping) }()
		defer func() { stop(); <-pinging }() // no write after the handler returns
		if _, err := s.RunStream(ctx, turn, func(e Event) error { return out.Send(e) }); err != nil {
			logging.FromContext(ctx).InfoContext(ctx, "stream ended early", "err", err.Error())
		}
	})
}
