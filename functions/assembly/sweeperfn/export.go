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
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/trigger"
	"github.com/workflowchat/service/shared/usage"
	"github.com/workflowchat/service/shared/workflow"
)

// Exporter builds the writer of the queued data exports (package
// export). The zip holds profile.json (with the model preference),
// tool-policies.json, usage/<month>.json for every month since the
// account was created, audit.json, chats/<chatId>/chat.json (the chat,
// its messages of every branch, its runs, its attachments' descriptions
// and its shares) with chats/<chatId>/attachments/<id>/<name> (each ready
// attachment's bytes, streamed from the blob store; a pending one's
// upload is checked first, as a read of it would),
// workflows/<workflowId>/workflow.json (the workflow, its conversation
// and proposals, every kept version with its definition, its runs and
// its triggers, never their secrets), knowledge/<kbId>/knowledge-base.json
// (a knowledge base and its documents) with
// knowledge/<kbId>/documents/<docId>.json (each document's chunks,
// streamed from the blob store), and mcp-servers.json (the remote MCP
// servers as the API shows them: never their secrets or tokens). Every
// list is read a DynamoDB page at a time and written to the zip element
// by element (export.Object), so that no account is ever held in memory
// whole.
func Exporter(cfg config.Config, d assembly.Deps, blobs blob.Store) *export.Runner {
	users := d.Users(cfg)
	policies := store.NewToolPolicies(d.DB, cfg.UsersTable)
	meter := store.NewUsage(d.DB, cfg.UsersTable)
	auditLog := store.NewAudit(d.DB, cfg.DataTable)
	chats := store.NewChats(d.DB, cfg.DataTable)
	atts := store.NewAttachments(d.DB, cfg.DataTable)
	// Attachments settle lazily, at their first read: one uploaded but
	// never read is settled here as a read would, so that its bytes are
	// exported.
	settler := attachment.NewService(attachment.Options{Store: atts, Blobs: blobs, Quota: cfg.UserStorageQuota, Now: d.Now})
	workflows := store.NewWorkflows(d.DB, cfg.DataTable)
	runs := store.NewRuns(d.DB, cfg.DataTable)
	triggers := store.NewTriggers(d.DB, cfg.DataTable)
	kbs := store.NewKnowledge(d.DB, cfg.DataTable)
	servers := store.NewMCPServers(d.DB, cfg.DataTable)
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
			return a.Array("audit.json", func(add func(any) error) error {
				return eachPage(func(cursor string) (string, error) {
					evs, next, err := auditLog.AuditPage(ctx, uid, 100, cursor)
					return next, addAll(add, evs, err)
				})
			})
		}},
		export.Section{Name: "chats", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			return chats.EachChat(ctx, uid, func(c chat.Chat) error {
				dir := "chats/" + c.ID + "/"
				as, err := atts.ChatAttachments(ctx, c.ID)
				if err != nil {
					return err
				}
				for i := range as {
					if as[i], err = settler.Settle(ctx, as[i]); err != nil {
						return err
					}
				}
				err = a.Object(dir+"chat.json", func(o *export.Object) error {
					if err := o.Field("chat", c); err != nil {
						return err
					}
					if err := o.Array("messages", func(add func(any) error) error {
						return chats.EachMessage(ctx, c.ID, func(m chat.Message) error { return add(m) })
					}); err != nil {
						return err
					}
					if err := o.Array("runs", func(add func(any) error) error {
						return eachPage(func(cursor string) (string, error) {
							rs, next, err := runs.ChatRunsPage(ctx, c.ID, 100, cursor)
							return next, addAll(add, rs, err)
						})
					}); err != nil {
						return err
					}
					if err := o.Field("attachments", as); err != nil {
						return err
					}
					return o.Array("shares", func(add func(any) error) error {
						return eachPage(func(cursor string) (string, error) {
							sh, next, err := chats.ChatShares(ctx, c.ID, paging.Cursor{Limit: paging.MaxLimit, After: cursor})
							for i := range sh {
								sh[i].URL = chat.ShareURL(cfg.PublicBaseURL, sh[i].ID) // as the API shows it
							}
							return next, addAll(add, sh, err)
						})
					})
				})
				if err != nil {
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
				return a.Object("workflows/"+w.ID+"/workflow.json", func(o *export.Object) error {
					if err := o.Field("workflow", w); err != nil {
						return err
					}
					if err := o.Array("messages", func(add func(any) error) error {
						return workflows.EachWorkflowMessage(ctx, w.ID, func(m workflow.Message) error { return add(m) })
					}); err != nil {
						return err
					}
					if err := o.Array("proposals", func(add func(any) error) error {
						return workflows.EachProposal(ctx, w.ID, func(p workflow.Proposal) error { return add(p) })
					}); err != nil {
						return err
					}
					if err := o.Array("versions", func(add func(any) error) error {
						return eachPage(func(cursor string) (string, error) {
							page, err := workflows.WorkflowVersions(ctx, w, paging.MaxLimit, cursor)
							if err != nil {
								return "", err
							}
							for _, v := range page.Versions {
								full, err := workflows.WorkflowVersion(ctx, w, v.Version)
								if err != nil {
									return "", err
								}
								if err := add(full); err != nil {
									return "", err
								}
							}
							return page.Next, nil
						})
					}); err != nil {
						return err
					}
					if err := o.Array("runs", func(add func(any) error) error {
						return eachPage(func(cursor string) (string, error) {
							rs, next, err := runs.WorkflowRunsPage(ctx, w.ID, 100, cursor)
							return next, addAll(add, rs, err)
						})
					}); err != nil {
						return err
					}
					return o.Field("triggers", views)
				})
			})
		}},
		export.Section{Name: "knowledge bases", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			return eachPage(func(cursor string) (string, error) {
				page, next, err := kbs.ListKnowledgeBases(ctx, uid, paging.Cursor{Limit: paging.MaxLimit, After: cursor})
				if err != nil {
					return "", err
				}
				for _, kb := range page {
					dir := "knowledge/" + kb.ID + "/"
					var docs []string
					err := a.Object(dir+"knowledge-base.json", func(o *export.Object) error {
						if err := o.Field("knowledgeBase", kb); err != nil {
							return err
						}
						return o.Array("documents", func(add func(any) error) error {
							return eachPage(func(cursor string) (string, error) {
								ds, next, err := kbs.ListDocuments(ctx, kb.ID, paging.Cursor{Limit: paging.MaxLimit, After: cursor})
								for _, d := range ds {
									if d.Status == knowledge.StatusReady {
										docs = append(docs, d.ID)
									}
								}
								return next, addAll(add, ds, err)
							})
						})
					})
					if err != nil {
						return "", err
					}
					// A knowledge base's documents are bounded
					// (knowledge.MaxDocuments): their ids fit in memory.
					for _, id := range docs {
						if err := copyBlob(ctx, blobs, a, knowledge.SegmentKey(kb.ID, id), dir+"documents/"+id+".json"); err != nil {
							return "", err
						}
					}
				}
				return next, nil
			})
		}},
		export.Section{Name: "remote MCP servers", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			return a.Array("mcp-servers.json", func(add func(any) error) error {
				return eachPage(func(cursor string) (string, error) {
					page, next, err := servers.ListServers(ctx, uid, paging.Cursor{Limit: paging.MaxLimit, After: cursor})
					if err != nil {
						return "", err
					}
					for _, s := range page {
						// The view never holds the sealed secret.
						if err := add(mcpserver.NewView(s)); err != nil {
							return "", err
						}
					}
					return next, nil
				})
			})
		}},
	)
}

// eachPage calls page with the cursor of each page in turn, from the
// first ("") until a page returns no next cursor.
func eachPage(page func(cursor string) (next string, err error)) error {
	cursor := ""
	for {
		next, err := page(cursor)
		if err != nil || next == "" {
			return err
		}
		cursor = next
	}
}

// addAll adds each of vs, unless err (a page's failure) is set.
func addAll[T any](add func(any) error, vs []T, err error) error {
	if err != nil {
		return err
	}
	for _, v := range vs {
		if err := add(v); err != nil {
			return err
		}
	}
	return nil
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
