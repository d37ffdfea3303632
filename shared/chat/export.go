package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/model"
)

// Export formats.
const (
	ExportMarkdown = "markdown"
	ExportJSON     = "json"
)

// MaxExportBytes bounds an export file, counted as a buffered Lambda's
// answer carries it (httpapi.BodyWireSize: the file a JSON string of the
// response event, each quote, backslash and line break two bytes, another
// control character six), under the 6 MB a Lambda behind the HTTP API
// may answer: a longer path is 409 EXPORT_TOO_LARGE. The file's own
// bytes alone let 3.2 MB of quotes (6.4 MB in the answer) through.
const MaxExportBytes = 5 << 20

// Exported is a chat's current path as GET .../export?format=json gives
// it.
type Exported struct {
	ID         string            `json:"id"`
	Title      string            `json:"title"`
	CreatedAt  time.Time         `json:"createdAt"`
	ExportedAt time.Time         `json:"exportedAt"`
	Messages   []ExportedMessage `json:"messages"`
}

// ExportedMessage is a message of an export.
type ExportedMessage struct {
	ID        string     `json:"id"`
	ParentID  *string    `json:"parentId"`
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	ModelID   string     `json:"modelId,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	Status    string     `json:"status"`
	CreatedAt time.Time  `json:"createdAt"`
}

// Export returns the current path of chat id (see Messages) as a file in
// format (ExportMarkdown or ExportJSON): its name and bytes. NotFound,
// Forbidden.
func (s *Service) Export(ctx context.Context, id, format string) (string, []byte, error) {
	const op = "chat.Export"
	c, msgs, err := s.ownedChat(ctx, op, id)
	if err != nil {
		return "", nil, err
	}
	path := currentPath(c, msgs)
	name := "chat-" + c.ID
	if format == ExportJSON {
		e := Exported{ID: c.ID, Title: c.Title, CreatedAt: c.CreatedAt, ExportedAt: s.clock(), Messages: make([]ExportedMessage, len(path))}
		for i, m := range path {
			for j := range m.ToolCalls {
				m.ToolCalls[j].ResultURL = "" // signed, short-lived: not for a file
			}
			e.Messages[i] = ExportedMessage{ID: m.ID, ParentID: m.ParentID, Role: m.Role, Content: m.Content, ModelID: m.ModelID,
				ToolCalls: m.ToolCalls, Status: m.Status, CreatedAt: m.CreatedAt}
		}
		b, err := json.MarshalIndent(e, "", "  ")
		if err != nil {
			return "", nil, errs.Wrap(op, err)
		}
		return name + ".json", b, exportBound(op, b)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", markdownLine(c.Title))
	for _, m := range path {
		who := "User"
		if m.Role == model.RoleAssistant {
			who = "Assistant"
			if m.ModelID != "" {
				who += " (" + markdownLine(m.ModelID) + ")"
			}
		}
		fmt.Fprintf(&b, "## %s, %s\n\n", who, m.CreatedAt.UTC().Format(time.RFC3339))
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, "Tool call `%s`: `%s`\n\n", markdownLine(tc.ToolName), markdownLine(string(tc.Result)))
		}
		b.WriteString(strings.TrimRight(m.Content, "\n"))
		b.WriteString("\n\n")
	}
	return name + ".md", b.Bytes(), exportBound(op, b.Bytes())
}

// exportBound fails with Conflict EXPORT_TOO_LARGE for a file over
// MaxExportBytes as a Lambda's answer carries it.
func exportBound(op string, b []byte) error {
	if httpapi.BodyWireSize(b) > MaxExportBytes {
		return errs.E(op, errs.Conflict, "EXPORT_TOO_LARGE", "this conversation is too long to export as one file (at most 5 MiB)")
	}
	return nil
}

// markdownLine returns s on one line, without backticks (it goes into a
// heading or a code span).
func markdownLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ", "`", "'").Replace(s)
}

// handleExport answers the chat's export as an attachment.
func handleExport(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		format := r.URL.Query().Get("format")
		if format == "" {
			format = ExportMarkdown
		}
		if format != ExportMarkdown && format != ExportJSON {
			httpapi.WriteError(w, r, errs.Fields("chat.handleExport", errs.FieldError{Field: "format", Message: "must be markdown or json"}))
			return
		}
		name, body, err := s.Export(r.Context(), id, format)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		ct := "text/markdown; charset=utf-8"
		if format == ExportJSON {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
}
