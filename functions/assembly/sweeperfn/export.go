package sweeperfn

import (
	"context"
	"strings"
	"time"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/export"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/usage"
	"github.com/workflowchat/service/shared/workflow"
)

// Exporter builds the writer of the queued data exports (package
// export): the zip holds profile.json (with the model preference),
// tool-policies.json, usage/<month>.json for every month since the
// account was created, audit.json, chats/<chatId>/chat.json (the chat,
// its messages, its runs and its attachments' descriptions) with
// chats/<chatId>/attachments/<id>/<name> (each ready attachment's bytes,
// streamed from the blob store), and workflows/<workflowId>/workflow.json
// (the workflow, its conversation, its runs and its triggers, never their
// secrets). Each chat and workflow is read one at a time.
func Exporter(cfg config.Config, d assembly.Deps, blobs blob.Store) *export.Runner {
	users := d.Users(cfg)
	policies := store.NewToolPolicies(d.DB, cfg.UsersTable)
	meter := store.NewUsage(d.DB, cfg.UsersTable)
	auditLog := store.NewAudit(d.DB, cfg.DataTable)
	chats := store.NewChats(d.DB, cfg.DataTable)
	atts := store.NewAttachments(d.DB, cfg.DataTable)
	workflows := store.NewWorkflows(d.DB, cfg.DataTable)
	runs := store.NewRuns(d.DB, cfg.DataTable)
	triggers := store.NewTriggers(d.DB, cfg.DataTable)
	now := d.Now
	if now == nil {
		now = time.Now
	}
	return export.NewRunner(store.NewExports(d.DB, cfg.DataTable), blobs, now, d.Logger, "",
		export.Section{Name: "profile", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			u, model, err := users.Profile(ctx, uid)
			if err != nil {
				return err
			}
			p, err := policies.ToolPolicies(ctx, uid)
			if err != nil {
				return err
			}
			if err := a.JSON("profile.json", map[string]any{"user": u, "modelPreference": model}); err != nil {
				return err
			}
			if err := a.JSON("tool-policies.json", p); err != nil {
				return err
			}
			end := now().UTC()
			for m := time.Date(u.CreatedAt.Year(), u.CreatedAt.Month(), 1, 0, 0, 0, 0, time.UTC); !m.After(end); m = m.AddDate(0, 1, 0) {
				month := usage.Month(m)
				c, err := meter.MonthUsage(ctx, uid, month)
				if err != nil {
					return err
				}
				if len(c) > 0 {
					if err := a.JSON("usage/"+month+".json", c); err != nil {
						return err
					}
				}
			}
			return nil
		}},
		export.Section{Name: "audit log", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			var all []any
			cursor := ""
			for {
				evs, next, err := auditLog.AuditPage(ctx, uid, 100, cursor)
				if err != nil {
					return err
				}
				for _, e := range evs {
					all = append(all, e)
				}
				if next == "" {
					return a.JSON("audit.json", all)
				}
				cursor = next
			}
		}},
		export.Section{Name: "chats", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			return chats.EachChat(ctx, uid, func(c chat.Chat) error {
				_, msgs, err := chats.Conversation(ctx, c.ID)
				if err != nil {
					return err
				}
				rs, err := allRuns(func(cursor string) ([]workflow.Run, string, error) { return runs.ChatRunsPage(ctx, c.ID, 100, cursor) })
				if err != nil {
					return err
				}
				as, err := atts.ChatAttachments(ctx, c.ID)
				if err != nil {
					return err
				}
				dir := "chats/" + c.ID + "/"
				if err := a.JSON(dir+"chat.json", map[string]any{"chat": c, "messages": msgs, "runs": rs, "attachments": as}); err != nil {
					return err
				}
				for _, at := range as {
					if at.Status != attachment.StatusReady {
						continue
					}
					if err := copyBlob(ctx, blobs, a, attachment.Key(uid, at.ID), dir+"attachments/"+at.ID+"/"+fileName(at.Name)); err != nil {
						return err
					}
				}
				return nil
			})
		}},
		export.Section{Name: "workflows", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			return workflows.EachWorkflow(ctx, uid, func(w workflow.Workflow) error {
				_, msgs, err := workflows.Conversation(ctx, w.ID)
				if err != nil {
					return err
				}
				rs, err := allRuns(func(cursor string) ([]workflow.Run, string, error) {
					return runs.WorkflowRunsPage(ctx, w.ID, 100, cursor)
				})
				if err != nil {
					return err
				}
				ts, err := triggers.WorkflowTriggers(ctx, w.ID)
				if err != nil {
					return err
				}
				views := make([]trigger.View, len(ts))
				for i, t := range ts {
					// Everything but the secret (and what derives it).
					views[i] = trigger.View{ID: t.ID, WorkflowID: t.WorkflowID, Type: t.Type, Enabled: t.Enabled, Schedule: t.Schedule,
						Timezone: t.Timezone, Input: t.Input, Overlap: t.Overlap, LastFire: t.LastFire, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
				}
				return a.JSON("workflows/"+w.ID+"/workflow.json", map[string]any{"workflow": w, "messages": msgs, "runs": rs, "triggers": views})
			})
		}},
	)
}

// allRuns reads every page of a run listing.
func allRuns(page func(cursor string) ([]workflow.Run, string, error)) ([]workflow.Run, error) {
	var out []workflow.Run
	cursor := ""
	for {
		rs, next, err := page(cursor)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// copyBlob streams the blob at key into the archive as name; a blob gone
// meanwhile (its attachment deleted) is left out.
func copyBlob(ctx context.Context, blobs blob.Backend, a *export.Archive, key, name string) error {
	o, err := blobs.Get(ctx, key)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			return nil
		}
		return err
	}
	defer o.Body.Close()
	return a.Copy(name, o.Body)
}

// fileName makes an attachment's name one safe path element of the zip:
// no separators, no "." or "..", so that unpacking cannot write outside
// the attachment's folder.
func fileName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, name)
	if name == "" || name == "." || name == ".." {
		return "file"
	}
	return name
}
