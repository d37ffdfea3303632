package sweeperfn

import (
	"context"
	"time"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/account"
	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/export"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/workflow"
)

// LastPass is how long after its request an erasure runs again: past
// the last upload URL the user may hold (issued before the deletion,
// valid attachment.UploadTTL), with a minute for clocks. A reply or run
// under way at the deletion writes, if at all, within it (its chat or
// workflow is gone after the first pass, and its settle never writes a
// month's usage back: usage.Meter.Settle).
const LastPass = attachment.UploadTTL + time.Minute

// Eraser builds the erasure of deleted accounts (package account), in
// this order: every chat of the user, as the user's own delete does (its
// messages, runs, attachments with their blobs and the replies' values,
// through chats); every workflow (its triggers with their schedules, its
// runs with their values); every knowledge base (its documents, vectors
// and segments); what remains in the user's blob folders (an upload never
// settled) and the user's exports; the export items; the user's rate
// limit counters; then the user's own items (store.Accounts:
// profile, policies, usage, counters, audit log, sessions, OAuth
// grants and tokens). Every part runs once more LastPass after the
// request (account.Eraser.WithLastPass). chats and wfs are the
// sweeper's one chat and workflow service (Sweeper).
func Eraser(cfg config.Config, d assembly.Deps, chats *chat.Service, wfs *workflow.Service, blobs blob.Store, kbs *knowledge.Service) *account.Eraser {
	chatStore := store.NewChats(d.DB, cfg.DataTable)
	workflows := store.NewWorkflows(d.DB, cfg.DataTable)
	accounts := d.Accounts(cfg)
	exports := store.NewExports(d.DB, cfg.DataTable)
	limits, rules := store.NewRateLimits(d.DB, cfg.RateLimitsTable), cfg.RateLimitRules()
	return account.NewEraser(accounts, d.Logger,
		account.Part{Name: "chats", Erase: func(ctx context.Context, del account.Deletion) error {
			// What a reply under way at the first pass wrote after its
			// chat was deleted (its log's later events), at the last.
			if !del.LastPassAt.IsZero() {
				for _, id := range del.BusyChats {
					if err := chatStore.DeleteChatLeftovers(ctx, id); err != nil {
						return err
					}
				}
			}
			for {
				cs, _, err := chatStore.ListChats(ctx, del.UserID, paging.Page{Limit: paging.MaxLimit}, true)
				if err != nil || len(cs) == 0 {
					return err
				}
				var busy []string
				for _, c := range cs {
					if c.Generation != "" {
						busy = append(busy, c.ID)
					}
				}
				// Recorded before the deletes, so that a crash between
				// them cannot lose a chat's id.
				if err := accounts.AddBusyChats(ctx, del.UserID, busy); err != nil {
					return err
				}
				for _, c := range cs {
					if err := chats.Delete(ctx, c.ID); err != nil {
						return err
					}
				}
			}
		}},
		account.Part{Name: "workflows", Erase: func(ctx context.Context, del account.Deletion) error {
			for {
				ws, _, err := workflows.ListWorkflows(ctx, del.UserID, paging.Page{Limit: paging.MaxLimit})
				if err != nil || len(ws) == 0 {
					return err
				}
				for _, w := range ws {
					if err := wfs.Delete(ctx, w.ID); err != nil {
						return err
					}
				}
			}
		}},
		account.Part{Name: "knowledge bases", Erase: func(ctx context.Context, del account.Deletion) error {
			for {
				page, _, err := kbs.List(ctx, del.UserID, paging.Cursor{Limit: paging.MaxLimit})
				if err != nil || len(page) == 0 {
					return err
				}
				for _, kb := range page {
					if err := kbs.Delete(ctx, del.UserID, kb.ID); err != nil {
						return err
					}
				}
			}
		}},
		account.Part{Name: "blobs", Erase: func(ctx context.Context, del account.Deletion) error {
			for _, p := range []string{attachment.UploadKey(del.UserID, ""), attachment.Key(del.UserID, ""), export.Prefix(del.UserID)} {
				if _, err := blobs.DeletePrefix(ctx, p); err != nil {
					return err
				}
			}
			return nil
		}},
		account.Part{Name: "rate limits", Erase: func(ctx context.Context, del account.Deletion) error {
			now := time.Now()
			if d.Now != nil {
				now = d.Now()
			}
			for _, r := range rules {
				for _, w := range r.Windows {
					if err := limits.DeleteWindows(ctx, del.UserID, r.Name, w.Per, now); err != nil {
						return err
					}
				}
			}
			return nil
		}},
		account.Part{Name: "exports", Erase: func(ctx context.Context, del account.Deletion) error {
			return exports.DeleteExports(ctx, del.UserID)
		}},
		account.Part{Name: "items", Erase: accounts.EraseUserItems},
	).WithLastPass(LastPass, d.Now)
}
