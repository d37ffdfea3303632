// Package chatsfn builds ChatsFunction (chats and their messages) and
// StreamFunction (the chat reply as Server-Sent Events): two functions
// over the same chat service, so one builder package.
package chatsfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/workflow/runs"
)

var required = []string{"USERS_TABLE", "SESSIONS_TABLE", "DATA_TABLE", "RATE_LIMITS_TABLE", "MCP_URL", "MCP_SERVICE_KEY"}

// Chats is ChatsFunction: the chat routes and the attachment routes
// (shared/attachment), whose blobs live in BLOB_BUCKET. Deleting a chat
// deletes its attachments first (store.Chats.WithCleanup).
var Chats = assembly.Function{
	LogicalID: "ChatsFunction",
	Required:  append(append([]string{}, required...), "BLOB_BUCKET"),
	Build: func(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
		atts, err := Attachments(ctx, cfg, d)
		if err != nil {
			return nil, err
		}
		svc, err := service(ctx, cfg, d, chatStore(cfg, d).WithCleanup(atts.DeleteChat))
		if err != nil {
			return nil, err
		}
		r := chat.Routes(svc, d.Auth(cfg), limits(cfg, d))
		ar := attachment.Routes(atts, d.Auth(cfg), attachment.Limits{Limiter: d.Limiter(cfg), Create: cfg.RateLimitAttachments})
		r.Mount(ar, ar.Patterns()...)
		return r, nil
	},
}

// Attachments returns the attachment service: attachments in the Data
// table, their bytes in the blob store (blobstore.Open), each user's
// storage within USER_STORAGE_QUOTA.
func Attachments(ctx context.Context, cfg config.Config, d assembly.Deps) (*attachment.Service, error) {
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return attachment.NewService(attachment.Options{Store: store.NewAttachments(d.DB, cfg.DataTable), Blobs: blobs,
		Quota: cfg.UserStorageQuota, Now: d.Now}), nil
}

// chatStore is the chats of the Data table, adding the usage of replies
// to the Users table.
func chatStore(cfg config.Config, d assembly.Deps) *store.Chats {
	return store.NewChats(d.DB, cfg.DataTable).WithUsage(cfg.UsersTable)
}

// Stream is StreamFunction, behind a Lambda function URL with response
// streaming.
var Stream = assembly.Function{
	LogicalID:   "StreamFunction",
	Required:    required,
	FunctionURL: true,
	Build: func(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
		svc, err := service(ctx, cfg, d, chatStore(cfg, d))
		if err != nil {
			return nil, err
		}
		return chat.StreamRoutes(svc, d.Auth(cfg), d.PingInterval, limits(cfg, d)), nil
	},
}

// limits are the chat routes' rate limits: RATE_LIMIT_MESSAGES,
// RATE_LIMIT_STREAMS and RATE_LIMIT_RESUMES.
func limits(cfg config.Config, d assembly.Deps) chat.Limits {
	return chat.Limits{Limiter: d.Limiter(cfg), Messages: cfg.RateLimitMessages, Streams: cfg.RateLimitStreams, Resumes: cfg.RateLimitResumes}
}

// service builds the chat service: chats in the Data table (chats), the configured
// models, the tool server's tools (one catalog), the users' model
// preferences, their tool policies, the usage meter (replies add their usage in the Users
// table), and the runner of workflows in chats, with the stream's time
// limit.
func service(ctx context.Context, cfg config.Config, d assembly.Deps, chats *store.Chats) (*chat.Service, error) {
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	catalog := toolclient.NewCatalog(d.ToolClient(cfg, 0), cfg.ToolsCacheTTL, d.Now)
	policies := d.ToolPolicies(cfg, catalog)
	runner := runs.NewService(runs.Options{
		Runs: store.NewRuns(d.DB, cfg.DataTable), Workflows: store.NewWorkflows(d.DB, cfg.DataTable),
		Tools: d.Meter(cfg).Guard(policies.Steps(catalog)), Now: d.Now, StepTimeout: d.StepTimeout, RunTimeout: runs.StreamRunTimeout,
	})
	return chat.NewService(chat.Options{
		Store: chats, Usage: d.Meter(cfg), Policies: policies, Models: models, Preferences: d.Users(cfg), DefaultModelID: cfg.DefaultModelID,
		Tools: catalog, Workflows: runner, Now: d.Now, Lease: cfg.GenerationLease,
	}), nil
}
