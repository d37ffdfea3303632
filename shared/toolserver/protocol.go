// Package toolserver is the key-protected tool server (McpFunction, POST
// /mcp). The server speaks two protocols on one endpoint:
// the service protocol of docs/toolserver.md ({"method", "params"} in, {"data"} out)
// and the Model Context Protocol (JSON-RPC 2.0, Streamable HTTP,
// stateless), both over the same tools.Registry. Its client, which speaks
// the service protocol, is package toolclient.
package toolserver

import (
	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/tools"
)

// The service protocol's wire types live with its client (package
// toolclient), which the service's functions link without the tools.
type (
	Request      = toolclient.Request
	SearchParams = toolclient.SearchParams
	GetParams    = toolclient.GetParams
	RunParams    = toolclient.RunParams
	ToolSummary  = toolclient.ToolSummary
	ToolsResult  = toolclient.ToolsResult
	Annotations  = toolclient.Annotations
	ToolDetail   = toolclient.ToolDetail
	RunResult    = toolclient.RunResult
)

// The service protocol's methods and key header.
const (
	MethodListTools   = toolclient.MethodListTools
	MethodSearchTools = toolclient.MethodSearchTools
	MethodGetTool     = toolclient.MethodGetTool
	MethodRunTool     = toolclient.MethodRunTool
	ServiceKeyHeader  = toolclient.ServiceKeyHeader
)

// Summary returns t as a listTools item.
func Summary(t *tools.Tool) ToolSummary {
	return ToolSummary{ID: t.ID, Name: t.Name, Description: t.Description, Category: t.Category, InputSchema: t.InputSchema}
}

// Detail returns t as getTool's data.
func Detail(t *tools.Tool) ToolDetail {
	a := t.Annotations
	return ToolDetail{
		ID: t.ID, Name: t.Name, Description: t.Description, Category: t.Category,
		InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Outputs: t.Outputs(),
		Annotations: Annotations{ReadOnlyHint: a.ReadOnly, DestructiveHint: a.Destructive, IdempotentHint: a.Idempotent, OpenWorldHint: a.OpenWorld},
		Metered:     t.Metered,
	}
}
