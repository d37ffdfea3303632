package toolserver

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	"github.com/workflowchat/service/shared/mcprpc"
)

// ErrBatch is the message of the JSON-RPC error a batch is answered
// with.
const ErrBatch = mcprpc.ErrBatch

// isJSONRPC reports whether msg is meant as a JSON-RPC message: it has a
// jsonrpc member (of any value; a wrong one is answered as JSON-RPC).
func isJSONRPC(msg map[string]json.RawMessage) bool {
	_, ok := msg["jsonrpc"]
	return ok
}

// namesServiceMethod reports whether msg's method is one of the service
// protocol's.
func namesServiceMethod(msg map[string]json.RawMessage) bool {
	var method string
	if json.Unmarshal(msg["method"], &method) != nil {
		return false
	}
	switch method {
	case MethodListTools, MethodSearchTools, MethodGetTool, MethodRunTool:
		return true
	}
	return false
}

// fromMCPClient reports whether r's headers mark it as an MCP client's:
// an MCP-Protocol-Version header, or an Accept that lists
// text/event-stream, which the Streamable HTTP transport asks of every
// POST. A body from such a client that is not valid JSON, or not an
// object, is answered as JSON-RPC.
func fromMCPClient(r *http.Request) bool {
	if r.Header.Get("MCP-Protocol-Version") != "" {
		return true
	}
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			if mt, _, err := mime.ParseMediaType(part); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}
