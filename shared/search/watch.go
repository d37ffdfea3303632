package search

import (
	"context"

	"github.com/workflowchat/service/shared/chat"
)

// Watch returns store with each chat's delete removing the chat from the
// index once the chat is marked deleted, before its items go (a removal
// that fails fails the delete, which a retry finishes). Every other method
// is store's: messages are indexed by the searches that follow them
// (Indexer.CatchUp), not by their writes, so that storing a message costs
// nothing more.
func Watch(store chat.Store, x *Indexer) chat.Store {
	return &watched{Store: store, x: x}
}

type watched struct {
	chat.Store
	x *Indexer
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
