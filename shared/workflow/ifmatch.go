package workflow

import (
	"slices"
	"strconv"
	"strings"

	"github.com/workflowchat/service/shared/errs"
)

// ETag returns the entity tag of a workflow at version: the version
// quoted, "7" (docs/decisions.md, Workflow definitions).
func ETag(version int) string { return `"` + strconv.Itoa(version) + `"` }

// Precondition is a parsed If-Match header: the versions a write may
// apply to. The zero value (no header) matches every version.
type Precondition struct {
	set      bool
	any      bool
	versions []int
}

// ParseIfMatch parses an If-Match header (RFC 9110, 13.1.1) of workflow
// entity tags: "*" (any version), or a comma-separated list of tags,
// each the version quoted ("7"), weak (W/"7": the version is the same
// whatever encoding a proxy gave it) or bare (7, for hand-written
// requests). An empty header is no precondition. Errors: Invalid
// INVALID_IF_MATCH for anything else.
func ParseIfMatch(h string) (Precondition, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return Precondition{}, nil
	}
	if h == "*" {
		return Precondition{set: true, any: true}, nil
	}
	p := Precondition{set: true}
	for tag := range strings.SplitSeq(h, ",") {
		tag = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(tag), "W/"))
		if len(tag) >= 2 && tag[0] == '"' && tag[len(tag)-1] == '"' {
			tag = tag[1 : len(tag)-1]
		}
		v, err := strconv.Atoi(tag)
		if err != nil || v < 1 || strings.HasPrefix(tag, "+") || len(p.versions) >= 32 {
			return Precondition{}, &errs.Error{Op: "workflow.ParseIfMatch", Kind: errs.Invalid, Code: "INVALID_IF_MATCH",
				Message: `If-Match must be the workflow's ETag, its version in quotes (e.g. "3"), or *`,
				Details: []errs.FieldError{{Field: "If-Match", Message: `must be "<version>" or *`}}}
		}
		p.versions = append(p.versions, v)
	}
	return p, nil
}

// Set reports whether the request had an If-Match header.
func (p Precondition) Set() bool { return p.set }

// Matches reports whether a write may apply to the workflow at version.
func (p Precondition) Matches(version int) bool {
	return !p.set || p.any || slices.Contains(p.versions, version)
}

// mismatch is the error of a precondition that does not hold.
func mismatch(op string, current int) error {
	return errs.E(op, errs.PreconditionFailed, CodeVersionMismatch,
		"the workflow is at version "+strconv.Itoa(current)+" (ETag "+ETag(current)+"), not the one If-Match names; read it again and retry")
}
