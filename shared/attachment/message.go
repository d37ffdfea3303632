package attachment

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

// messageParallelism bounds the attachments of one message read at once.
const messageParallelism = 4

// ForMessage returns userID's attachments ids of chat chatID as a model
// taking in reads them (ForModel, with its default bounds), in the order
// of ids: what a chat message's attachmentIds carry to the model. Each
// must be ready (a pending one's upload is checked first, as Ready does).
// Errors, for the first id in order that fails: NotFound
// ATTACHMENT_NOT_FOUND (no such attachment in this chat: another chat's,
// another user's, deleted), Conflict ATTACHMENT_NOT_READY (not uploaded
// yet) or ATTACHMENT_FAILED, NotFound CHAT_NOT_FOUND, Forbidden (another
// user's chat), and storage errors.
func (s *Service) ForMessage(ctx context.Context, userID, chatID string, ids []string, in model.Input) ([]model.Attachment, error) {
	const op = "attachment.ForMessage"
	out := make([]model.Attachment, len(ids))
	errOf := make([]error, len(ids))
	// Every id is read, not cancelled at the first failure, so that the
	// error answered is the first id's in order, the same every time.
	var g errgroup.Group
	g.SetLimit(messageParallelism)
	for i, id := range ids {
		g.Go(func() error {
			a, err := s.Ready(ctx, userID, chatID, id)
			if err == nil {
				out[i], err = s.ForModel(ctx, a, in, 0, 0)
			}
			errOf[i] = err
			return nil
		})
	}
	_ = g.Wait()
	for _, err := range errOf {
		if err != nil {
			return nil, errs.Wrap(op, err)
		}
	}
	return out, nil
}
