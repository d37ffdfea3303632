package toolclient

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// MaxSearchQuery is the longest search query GET /api/tools/search takes,
// in characters.
const MaxSearchQuery = 200

// ListResponse is the data of GET /api/tools.
type ListResponse struct {
	Tools []ToolSummary `json:"tools"`
}

// SearchResponse is the data of GET /api/tools/search.
type SearchResponse struct {
	Tools []ToolSummary `json:"tools"`
	Total int           `json:"total"`
}

// parseRefresh reads the refresh query parameter of GET /api/tools:
// absent, "false" or "0" is no refresh; "true" or "1" forces a reload.
// Anything else, the empty value included, is VALIDATION_FAILED on field
// refresh.
func parseRefresh(r *http.Request) (bool, error) {
	q := r.URL.Query()
	if !q.Has("refresh") {
		return false, nil
	}
	switch q.Get("refresh") {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, errs.Fields("tools.ListTools", errs.FieldError{Field: "refresh", Message: "must be true, 1, false or 0"})
}

// Lister lists the tools of GET /api/tools for the signed-in user
// (Catalog; usertools.Catalog adds the user's remote tools).
type Lister interface {
	List(ctx context.Context, force bool) ([]ToolSummary, error)
}

// Tools are what the REST tool routes read: a Catalog, or the catalog
// with the user's own tools (usertools.Catalog).
type Tools interface {
	Lister
	Search(ctx context.Context, query string) ([]ToolSummary, error)
	Get(ctx context.Context, id string) (ToolDetail, error)
}

func handleList(c Lister) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (ListResponse, error) {
		force, err := parseRefresh(r)
		if err != nil {
			return ListResponse{}, err
		}
		tools, err := c.List(r.Context(), force)
		if err != nil {
			return ListResponse{}, err
		}
		return ListResponse{Tools: tools}, nil
	})
}

func handleSearch(c Tools) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (SearchResponse, error) {
		const op = "tools.SearchTools"
		q := strings.TrimSpace(r.URL.Query().Get("q"))
		switch {
		case q == "":
			return SearchResponse{}, errs.Fields(op, errs.FieldError{Field: "q", Message: "is required"})
		case utf8.RuneCountInString(q) > MaxSearchQuery:
			return SearchResponse{}, errs.Fields(op, errs.FieldError{Field: "q", Message: "must be at most 200 characters"})
		}
		tools, err := c.Search(r.Context(), q)
		if err != nil {
			return SearchResponse{}, err
		}
		return SearchResponse{Tools: tools, Total: len(tools)}, nil
	})
}

// Detail is the data of GET /api/tools/{toolId}: the list item's fields
// plus the output schema (not the outputs' names nor the annotations the
// tool server adds for its own callers).
type Detail struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Category     string          `json:"category"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

func handleGet(c Tools) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Detail, error) {
		d, err := c.Get(r.Context(), r.PathValue("toolId"))
		if err != nil {
			return Detail{}, err
		}
		return Detail{ID: d.ID, Name: d.Name, Description: d.Description, Category: d.Category,
			InputSchema: d.InputSchema, OutputSchema: d.OutputSchema}, nil
	})
}
