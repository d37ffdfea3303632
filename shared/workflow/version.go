package workflow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// The sources of a version: what made it.
const (
	VersionCreate   = "create"
	VersionPatch    = "patch"
	VersionProposal = "proposal"
	VersionRestore  = "restore"
)

// CodeVersionNotFound (404): the workflow has no such version.
const CodeVersionNotFound = "VERSION_NOT_FOUND"

// VersionSummary is a version as the list of a workflow's versions shows
// it.
type VersionSummary struct {
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	Source    string    `json:"source"`
	StepCount int       `json:"stepCount"`
}

// Version is one immutable definition a workflow has had: every write of
// a workflow keeps its new definition as the version of the workflow's
// new Version number, so the current one is a Version too.
type Version struct {
	VersionSummary
	WorkflowID   string          `json:"workflowId"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	Steps        []Step          `json:"steps"`
	ExposeAsTool bool            `json:"exposeAsTool"`
	ToolName     string          `json:"toolName,omitempty"`
}

// VersionOf returns w's definition as the Version w.Version, made by
// source.
func VersionOf(w Workflow, source string) Version {
	steps := w.Steps
	if steps == nil {
		steps = []Step{}
	}
	return Version{
		VersionSummary: VersionSummary{Version: w.Version, CreatedAt: w.UpdatedAt, Source: source, StepCount: len(steps)},
		WorkflowID:     w.ID, Name: w.Name, Description: w.Description, InputSchema: w.InputSchema, Steps: steps,
		ExposeAsTool: w.ExposeAsTool, ToolName: w.ToolName,
	}
}

// LegacySource is the source a workflow stored before versions gets for
// its current definition: create while it was never changed, else patch.
func LegacySource(w Workflow) string {
	if w.Version <= 1 {
		return VersionCreate
	}
	return VersionPatch
}

// Pinned returns w (its id, owner and times) with v's definition and
// number: the workflow as a run pinned to v runs it.
func (v Version) Pinned(w Workflow) Workflow {
	w.Name, w.Description, w.InputSchema, w.Steps = v.Name, v.Description, v.InputSchema, v.Steps
	w.ExposeAsTool, w.ToolName, w.Version = v.ExposeAsTool, v.ToolName, v.Version
	return w
}

// VersionNotFound is the error of a version workflowID does not have.
func VersionNotFound(op string, version int) error {
	return errs.E(op, errs.NotFound, CodeVersionNotFound, fmt.Sprintf("the workflow has no version %d", version))
}

// VersionsPage is a page of a workflow's versions, newest first; Next is
// the cursor of the next page, empty after the last.
type VersionsPage struct {
	Versions []VersionSummary
	Next     string
}
