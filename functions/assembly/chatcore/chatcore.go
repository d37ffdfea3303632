// Package chatcore builds the chat service, in one place with every
// option, for the functions that serve chats (ChatsFunction and
// StreamFunction, through chatsfn.Service) and the sweeper (which ends
// the streamed replies whose process died and deletes the chats of erased
// accounts): the Data table's chats, deleting a chat's runs' values with
// it from the blob store and its search index entries (search.Watch), the
// logs of streamed replies and their lease (GENERATION_LEASE), the
// replies' large values and the attachments in the blob store, the usage
// meter, the users' model preferences, the default model, the run
// service (a chat's workflow), the shares under PUBLIC_BASE_URL, and the
// clock. What makes replies (the models, the tool gate and catalog, the
// knowledge bases) is given by the function (Replies): the sweeper links
// no model and no tool, and gives none.
package chatcore

import (
	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/search"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/toolgate"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// Replies are what makes a chat's replies. A zero Replies makes none: a
// reply then has no model to call (the sweeper's, which only ends and
// deletes).
type Replies struct {
	// Models are the configured models (providers.Registry).
	Models *model.Registry
	// Gate decides and runs the models' tool calls over Tools.
	Gate *toolgate.Gate
	// Tools is the catalog of the tools replies may call.
	Tools chat.Tools
	// Knowledge is the knowledge bases chats name.
	Knowledge chat.Knowledge
}

// Service builds the chat service over the function's run service (rs),
// blob store, attachments (blobstore.Attachments, which the chat
// function's attachment routes share) and replies' parts; see the package
// comment.
func Service(cfg config.Config, d assembly.Deps, rs runstart.Runs, blobs blob.Store, atts chat.Attachments, r Replies) *chat.Service {
	chats := store.NewChats(d.DB, cfg.DataTable).WithRunBlobs(blobs)
	opts := chat.Options{
		Store: search.Watch(chats, d.Search(cfg).Indexer()), Jobs: store.NewJobs(d.DB, cfg.DataTable), Usage: d.Meter(cfg),
		Models: r.Models, Gate: r.Gate, Tools: r.Tools, Knowledge: r.Knowledge,
		Blobs: blobs, Attachments: atts, Preferences: d.Users(cfg), DefaultModelID: cfg.DefaultModelID,
		Runs: runs.ForChat{Service: rs.Service}, Now: d.Now, Lease: cfg.GenerationLease, Shares: chats, ShareBaseURL: cfg.PublicBaseURL,
		Erasures: store.NewDeletedAccounts(d.DB, cfg.DataTable),
	}
	return chat.NewService(opts)
}
