// Package streamfn builds StreamFunction: the chat reply as Server-Sent
// Events (and its resume), behind a Lambda function URL with response
// streaming, over the chat service of package chatsfn. A stream with a
// workflowId starts a durable run, handed to RunnerFunction, and renders
// its events. The replies' large values and the messages' attachments are
// in the blob store (BLOB_BUCKET).
package streamfn

import (
	"context"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/chatsfn"
	"github.com/workflowchat/service/functions/assembly/runstart"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
)

// Stream is StreamFunction.
var Stream = assembly.Function{
	LogicalID:   "StreamFunction",
	Required:    append(chatsfn.Required[:len(chatsfn.Required):len(chatsfn.Required)], "RUNNER_FUNCTION"),
	FunctionURL: true,
	Build: func(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
		blobs, err := blobstore.Open(ctx, cfg, d)
		if err != nil {
			return nil, err
		}
		rs, err := runstart.Build(ctx, cfg, d, blobs, runstart.NoSchedules)
		if err != nil {
			return nil, err
		}
		svc, err := chatsfn.Service(ctx, cfg, d, rs, blobs, blobstore.Attachments(cfg, d, blobs))
		if err != nil {
			return nil, err
		}
		return chat.StreamRoutes(svc, d.Auth(cfg), d.PingInterval, chatsfn.Limits(cfg, d)), nil
	},
}
