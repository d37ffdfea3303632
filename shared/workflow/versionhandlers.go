package workflow

import (
	"net/http"
	"strconv"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

type versionsList struct {
	Versions   []VersionSummary `json:"versions"`
	NextCursor string           `json:"nextCursor,omitempty"`
}

// maxVersionDigits bounds the version path parameter (a version number
// is an int the store keeps in 10 digits).
const maxVersionDigits = 9

// PathVersion returns the version path parameter of r: a positive
// integer of at most 9 digits, else Invalid INVALID_ID naming it.
func PathVersion(r *http.Request) (int, error) {
	v := r.PathValue("version")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || len(v) > maxVersionDigits || v[0] == '+' || v[0] == '0' {
		e := errs.E("workflow.PathVersion", errs.Invalid, "INVALID_ID", "version must be a positive integer (a workflow's version number)")
		e.Details = []errs.FieldError{{Field: "version", Message: "must be a positive integer"}}
		return 0, e
	}
	return n, nil
}

func handleVersions(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (versionsList, error) {
		id, err := httpapi.PathUUID(r, "workflowId")
		if err != nil {
			return versionsList{}, err
		}
		page, err := httpapi.ParseCursorPage(r)
		if err != nil {
			return versionsList{}, err
		}
		p, err := s.Versions(r.Context(), id, page)
		return versionsList{Versions: p.Versions, NextCursor: p.Next}, err
	})
}

func handleVersion(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Version, error) {
		id, err := httpapi.PathUUID(r, "workflowId")
		if err != nil {
			return Version{}, err
		}
		n, err := PathVersion(r)
		if err != nil {
			return Version{}, err
		}
		return s.Version(r.Context(), id, n)
	})
}

// handleRestore checks the path and If-Match (optional, as a PATCH's)
// before anything is read; the body is ignored.
func handleRestore(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Workflow, error) {
		id, err := httpapi.PathUUID(r, "workflowId")
		if err != nil {
			return Workflow{}, err
		}
		n, err := PathVersion(r)
		if err != nil {
			return Workflow{}, err
		}
		pre, err := ParseIfMatch(ifMatch(r))
		if err != nil {
			return Workflow{}, err
		}
		wf, err := s.Restore(r.Context(), id, n, pre)
		return withETag(w, wf, err)
	})
}
