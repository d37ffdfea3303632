package search

import (
	"context"
	"time"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/job"
)

// Watch returns store with the index kept current by x: each write that
// stores messages in a chat indexes the chat once it succeeded, and a
// chat's delete removes it from the index once the chat is marked deleted,
// before its items go (a removal that fails fails the delete, which a
// retry finishes). Every other method is store's.
//
// Indexing after a write is eager, not part of the write: a message is
// stored whatever happens to its indexing, and the next search catches the
// index up (Indexer.CatchUp), so nothing stored is missed for long.
func Watch(store chat.Store, x *Indexer) chat.Store {
	return &watched{Store: store, x: x}
}

type watched struct {
	chat.Store
	x *Indexer
}

func (w *watched) AddMessages(ctx context.Context, c chat.Chat, msgs ...chat.Message) error {
	return w.indexed(ctx, c, w.Store.AddMessages(ctx, c, msgs...))
}

func (w *watched) FinishGeneration(ctx context.Context, c chat.Chat, id string, msgs ...chat.Message) error {
	err := w.Store.FinishGeneration(ctx, c, id, msgs...)
	if len(msgs) == 0 {
		return err
	}
	return w.indexed(ctx, c, err)
}

func (w *watched) StartLoggedGeneration(ctx context.Context, c chat.Chat, g chat.Generation, first []job.Record, user, reply chat.Message) error {
	return w.indexed(ctx, c, w.Store.StartLoggedGeneration(ctx, c, g, first, user, reply))
}

func (w *watched) EndLoggedGeneration(ctx context.Context, c chat.Chat, reply chat.Message, recs []job.Record, expiredBefore time.Time) error {
	return w.indexed(ctx, c, w.Store.EndLoggedGeneration(ctx, c, reply, recs, expiredBefore))
}

func (w *watched) DeleteChat(ctx context.Context, id, userID string, beyond func(context.Context) error) error {
	return w.Store.DeleteChat(ctx, id, userID, func(ctx context.Context) error {
		if beyond != nil {
			if err := beyond(ctx); err != nil {
				return err
			}
		}
		return w.x.index.RemoveChat(ctx, userID, id)
	})
}

// indexed indexes c after a write that ended with err, when it succeeded,
// and answers err.
func (w *watched) indexed(ctx context.Context, c chat.Chat, err error) error {
	if err == nil {
		w.x.indexAfterWrite(ctx, c.UserID, c.ID)
	}
	return err
}
