package knowledge

import (
	"net/http"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/ratelimit"
)

// Limits are the rate limits of the knowledge base routes.
type Limits struct {
	Limiter *ratelimit.Limiter
	// Documents limits POST .../documents per user
	// (RATE_LIMIT_KNOWLEDGE_DOCUMENTS): each is an indexing.
	Documents ratelimit.Rule
}

// Routes returns the knowledge base routes, each behind a session,
// without rate limits (RoutesWith).
func Routes(s *Service, authn *auth.Service) *httpapi.Router { return RoutesWith(s, authn, Limits{}) }

// RoutesWith returns the knowledge base routes, each behind a session,
// adding documents limited by l.
func RoutesWith(s *Service, authn *auth.Service, l Limits) *httpapi.Router {
	r := httpapi.NewRouter()
	const kb = "/api/knowledge-bases/{knowledgeBaseId}"
	r.Handle("POST /api/knowledge-bases", authn.Require(handleCreate(s)))
	r.Handle("GET /api/knowledge-bases", authn.Require(handleList(s)))
	r.Handle("GET "+kb, authn.Require(httpapi.PathIDs(handleGet(s), "knowledgeBaseId")))
	r.Handle("PATCH "+kb, authn.Require(httpapi.PathIDs(handleUpdate(s), "knowledgeBaseId")))
	r.Handle("DELETE "+kb, authn.Require(httpapi.PathIDs(handleDelete(s), "knowledgeBaseId")))
	r.Handle("POST "+kb+"/documents", authn.Require(l.Limiter.Limit(l.Documents)(httpapi.PathIDs(handleAdd(s), "knowledgeBaseId"))))
	r.Handle("GET "+kb+"/documents", authn.Require(httpapi.PathIDs(handleDocuments(s), "knowledgeBaseId")))
	r.Handle("GET "+kb+"/documents/{documentId}", authn.Require(httpapi.PathIDs(handleDocument(s), "knowledgeBaseId", "documentId")))
	r.Handle("DELETE "+kb+"/documents/{documentId}", authn.Require(httpapi.PathIDs(handleDeleteDocument(s), "knowledgeBaseId", "documentId")))
	r.Handle("POST "+kb+"/query", authn.Require(httpapi.PathIDs(handleQuery(s), "knowledgeBaseId")))
	return r
}

type kbList struct {
	KnowledgeBases []KnowledgeBase `json:"knowledgeBases"`
	NextCursor     string          `json:"nextCursor,omitempty"`
}

type docList struct {
	Documents  []Document `json:"documents"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

type resultList struct {
	Results []Result `json:"results"`
}

// cursorPage parses limit and cursor; a cursor is the id of a page's last
// item (INVALID_PAGINATION otherwise).
func cursorPage(r *http.Request) (paging.Cursor, error) {
	p, err := httpapi.ParseCursorPage(r)
	if err == nil && p.After != "" && !httpapi.IsUUID(p.After) {
		e := errs.Fields("knowledge.page", errs.FieldError{Field: "cursor", Message: "must be the nextCursor of an earlier page"})
		e.Code = "INVALID_PAGINATION"
		return p, e
	}
	return p, err
}

func handleCreate(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, in CreateRequest) (KnowledgeBase, error) {
		return s.Create(r.Context(), auth.UserID(r.Context()), in)
	})
}

func handleList(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (kbList, error) {
		p, err := cursorPage(r)
		if err != nil {
			return kbList{}, err
		}
		kbs, next, err := s.List(r.Context(), auth.UserID(r.Context()), p)
		return kbList{KnowledgeBases: kbs, NextCursor: next}, err
	})
}

func handleGet(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (KnowledgeBase, error) {
		return s.Get(r.Context(), auth.UserID(r.Context()), r.PathValue("knowledgeBaseId"))
	})
}

func handleUpdate(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in UpdateRequest) (KnowledgeBase, error) {
		return s.Update(r.Context(), auth.UserID(r.Context()), r.PathValue("knowledgeBaseId"), in)
	})
}

func handleDelete(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		return httpapi.Empty{}, s.Delete(r.Context(), auth.UserID(r.Context()), r.PathValue("knowledgeBaseId"))
	})
}

func handleAdd(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusAccepted, func(w http.ResponseWriter, r *http.Request, in AddRequest) (Document, error) {
		return s.AddDocument(r.Context(), auth.UserID(r.Context()), r.PathValue("knowledgeBaseId"), in)
	})
}

func handleDocuments(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (docList, error) {
		p, err := cursorPage(r)
		if err != nil {
			return docList{}, err
		}
		docs, next, err := s.Documents(r.Context(), auth.UserID(r.Context()), r.PathValue("knowledgeBaseId"), p)
		return docList{Documents: docs, NextCursor: next}, err
	})
}

func handleDocument(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Document, error) {
		return s.Document(r.Context(), auth.UserID(r.Context()), r.PathValue("knowledgeBaseId"), r.PathValue("documentId"))
	})
}

func handleDeleteDocument(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		return httpapi.Empty{}, s.DeleteDocument(r.Context(), auth.UserID(r.Context()), r.PathValue("knowledgeBaseId"), r.PathValue("documentId"))
	})
}

func handleQuery(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in QueryRequest) (resultList, error) {
		res, err := s.Query(r.Context(), auth.UserID(r.Context()), r.PathValue("knowledgeBaseId"), in)
		return resultList{Results: res}, err
	})
}
