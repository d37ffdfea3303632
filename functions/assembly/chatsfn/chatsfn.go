// Package chatsfn builds ChatsFunction (chats and their messages) and the
// chat service it shares with StreamFunction (package streamfn, which
// alone hands workflow runs to the runner and so links the Lambda SDK).
package chatsfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/chatcore"
	"github.com/workflowchat/service/functions/assembly/knowledgefn"
	"github.com/workflowchat/service/functions/assembly/mcpserversfn"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/model/providers"
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/usertools"
)

// Required are the variables the chat functions refuse to start without:
// both keep their replies' large values and read attachments in the blob
// store (BLOB_BUCKET).
var Required = []string{"USERS_TABLE", "SESSIONS_TABLE", "DATA_TABLE", "RATE_LIMITS_TABLE", "MCP_URL", "MCP_SERVICE_KEY", "BLOB_BUCKET"}

// Chats is ChatsFunction: the chat routes, the attachment routes
// (shared/attachment), whose blobs live in BLOB_BUCKET, and the search
// over the user's chats (shared/search). Deleting a chat
// deletes its attachments and its replies' values first
// (chat.Service.Delete).
var Chats = assembly.Function{
	LogicalID: "ChatsFunction",
	Required:  Required,
	Build: func(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
		blobs, err := blobstore.Open(ctx, cfg, d)
		if err != nil {
			return nil, err
		}
		atts := blobstore.Attachments(cfg, d, blobs)
		// The run service checks the workflow a new chat names; this
		// function hands no run to the runner (no RUNNER_FUNCTION).
		rs, err := runstart.Build(ctx, cfg, d, blobs, runstart.NoSchedules)
		if err != nil {
			return nil, err
		}
		svc, err := Service(ctx, cfg, d, rs, blobs, atts)
		if err != nil {
			return nil, err
		}
		r := chat.Routes(svc, d.Auth(cfg), Limits(cfg, d))
		ar := attachment.Routes(atts, d.Auth(cfg), attachment.Limits{Limiter: d.Limiter(cfg), Create: cfg.RateLimitAttachments})
		r.Mount(ar, ar.Patterns()...)
		sr := searchRoutes(d.Search(cfg), cfg, d)
		r.Mount(sr, sr.Patterns()...)
		return r, nil
	},
}

// Limits are the chat routes' rate limits: RATE_LIMIT_MESSAGES,
// RATE_LIMIT_STREAMS and RATE_LIMIT_RESUMES.
func Limits(cfg config.Config, d assembly.Deps) chat.Limits {
	return chat.Limits{Limiter: d.Limiter(cfg), Messages: cfg.RateLimitMessages, Streams: cfg.RateLimitStreams, Resumes: cfg.RateLimitResumes}
}

// Service builds the chat service (chatcore.Service: the one
// construction, see there) with what makes its replies: the configured
// models under the usage meter (each model call reserves the user's
// budget and settles its usage in the Users table), the tool server's
// tools and the user's remote MCP tools (one catalog) behind the tool
// gate (policies, budget, identity), and the knowledge bases. rs is the
// run service (runstart.Build), whose durable runs a stream with a
// workflowId starts and renders; atts the attachments messages carry. It
// fails when the models or the vault cannot be built.
func Service(ctx context.Context, cfg config.Config, d assembly.Deps, rs runstart.Runs, blobs blob.Store, atts *attachment.Service) (*chat.Service, error) {
	models, err := providers.Registry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	builtin := toolclient.NewCatalog(d.ToolClient(cfg, 0).WithBlobs(blobs), cfg.ToolsCacheTTL, d.Now)
	// The user's own remote MCP tools too, called with their sealed
	// secrets (the vault).
	caller, err := mcpserversfn.Caller(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	catalog := d.UserTools(cfg, builtin, caller, usertools.DefaultTTL)
	// The knowledge bases chats name: the process's one knowledge
	// service, with the configured embedder (a query is embedded as its
	// documents were), built at its first use. knowledge_search runs in
	// process behind the gate.
	kb := knowledgefn.NewLazy(ctx, cfg, d, blobs)
	gate := d.Gate(cfg, catalog).WithLocal(knowledge.ToolID, kb)
	return chatcore.Service(cfg, d, rs, blobs, atts, chatcore.Replies{Models: models, Gate: gate, Tools: catalog, Knowledge: kb}), nil
}
