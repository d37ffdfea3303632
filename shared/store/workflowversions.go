package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/workflow"
)

// A workflow's versions live in its item collection (PK WF#<id>), two
// items each, written in the transaction of the workflow write that makes
// the version: the summary (SK !VER#M#<version, 10 digits>: version,
// createdAt, source, stepCount; small, so that listing 100 versions of a
// 350 KB workflow reads a few KB) and the definition (SK !VER#D#<...>: the
// workflow item's definition attributes, within one item as the workflow
// item is: workflow.MaxDefinitionBytes keeps both under DynamoDB's 400 KB).
// Their sort keys sort before every other item of the collection, so the
// conversation's Query starts after them and never reads a definition.
// The workflow's delete removes them with the rest of the collection.
const (
	versionPrefix     = "!VER#"
	versionMetaPrefix = versionPrefix + "M#"
	versionDefPrefix  = versionPrefix + "D#"
	// afterVersions sorts after every version key and before every other
	// item of a workflow collection ('$' follows '#').
	afterVersions = "!VER$"
)

func versionMetaSK(v int) string { return fmt.Sprintf("%s%010d", versionMetaPrefix, v) }
func versionDefSK(v int) string  { return fmt.Sprintf("%s%010d", versionDefPrefix, v) }

type versionMetaItem struct {
	PK, SK    string
	Type      string    `dynamo:"type"`
	Version   int       `dynamo:"version"`
	CreatedAt time.Time `dynamo:"createdAt"`
	Source    string    `dynamo:"source"`
	StepCount int       `dynamo:"stepCount"`
}

type versionDefItem struct {
	versionMetaItem
	WorkflowID   string `dynamo:"workflowId"`
	Name         string `dynamo:"name"`
	Description  string `dynamo:"description"`
	Steps        string `dynamo:"steps"`                 // JSON array
	InputSchema  string `dynamo:"inputSchema,omitempty"` // JSON object
	ExposeAsTool bool   `dynamo:"exposeAsTool,omitempty"`
	ToolName     string `dynamo:"toolName,omitempty"`
}

// versionPuts returns the puts of the two items of v, each conditioned on
// its absence when once is set (a new version is written once; a legacy
// one is the stored definition, which writing again cannot change).
func (s *Workflows) versionPuts(v workflow.Version, once bool) ([]*dynamo.Put, error) {
	b, err := json.Marshal(v.Steps)
	if err != nil {
		return nil, fmt.Errorf("encode steps: %w", err)
	}
	meta := versionMetaItem{PK: workflowPK(v.WorkflowID), SK: versionMetaSK(v.Version), Type: "wfversion", Version: v.Version,
		CreatedAt: v.CreatedAt, Source: v.Source, StepCount: v.StepCount}
	def := versionDefItem{versionMetaItem: meta, WorkflowID: v.WorkflowID, Name: v.Name, Description: v.Description,
		Steps: string(b), InputSchema: string(v.InputSchema), ExposeAsTool: v.ExposeAsTool, ToolName: v.ToolName}
	def.SK, def.Type = versionDefSK(v.Version), "wfversiondef"
	puts := []*dynamo.Put{s.table.Put(meta), s.table.Put(def)}
	if once {
		for _, p := range puts {
			p.If("attribute_not_exists(PK)")
		}
	}
	return puts, nil
}

// keepVersions returns the puts of the version items of next, made by
// source, and, when prev was stored before versions (prev.VersionsFrom
// 0), those of prev as a legacy version; it sets next.VersionsFrom. The
// caller encodes next's workflow item after this and adds the puts to its
// transaction after its other writes.
func (s *Workflows) keepVersions(next *workflow.Workflow, prev workflow.Workflow, source string) ([]*dynamo.Put, error) {
	if next.VersionsFrom == 0 {
		next.VersionsFrom = prev.VersionsFrom
	}
	vs := []workflow.Version{workflow.VersionOf(*next, source)}
	if next.VersionsFrom == 0 {
		next.VersionsFrom = prev.Version
		vs = append(vs, workflow.VersionOf(prev, workflow.LegacySource(prev)))
	}
	var out []*dynamo.Put
	for i, v := range vs {
		puts, err := s.versionPuts(v, i == 0)
		if err != nil {
			return nil, err
		}
		out = append(out, puts...)
	}
	return out, nil
}

func (it versionMetaItem) summary() workflow.VersionSummary {
	return workflow.VersionSummary{Version: it.Version, CreatedAt: it.CreatedAt, Source: it.Source, StepCount: it.StepCount}
}

var errBadVersionsCursor = badCursor("store.WorkflowVersions")

// WorkflowVersions returns up to limit versions of w (as read) newest
// first, after the one the cursor names, with one Query of the summaries.
// A workflow stored before versions has one: its current definition.
// Invalid INVALID_PAGINATION for a cursor this list did not give.
func (s *Workflows) WorkflowVersions(ctx context.Context, w workflow.Workflow, limit int, cursor string) (workflow.VersionsPage, error) {
	const op = "store.WorkflowVersions"
	limit = min(max(limit, 1), paging.MaxLimit)
	below := w.Version + 1
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		n, cerr := strconv.Atoi(string(raw))
		if err != nil || cerr != nil || len(raw) > 10 || n < 1 || n > w.Version+1 {
			return workflow.VersionsPage{}, errBadVersionsCursor
		}
		below = n
	}
	if w.VersionsFrom == 0 {
		page := workflow.VersionsPage{Versions: []workflow.VersionSummary{}}
		if below > w.Version {
			page.Versions = append(page.Versions, workflow.VersionOf(w, workflow.LegacySource(w)).VersionSummary)
		}
		return page, nil
	}
	var items []versionMetaItem
	if below > 1 {
		err := s.table.Get("PK", workflowPK(w.ID)).Range("SK", dynamo.Between, versionMetaSK(0), versionMetaSK(below-1)).
			Order(dynamo.Descending).SearchLimit(limit+1).All(ctx, &items)
		if err != nil {
			return workflow.VersionsPage{}, storeError(op, err)
		}
	}
	page := workflow.VersionsPage{Versions: make([]workflow.VersionSummary, 0, min(len(items), limit))}
	for i, it := range items {
		if i == limit {
			page.Next = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(items[limit-1].Version)))
			break
		}
		page.Versions = append(page.Versions, it.summary())
	}
	return page, nil
}

// WorkflowVersion returns version n of w (as read) with one GetItem (none
// for the current version of a workflow stored before versions). NotFound
// VERSION_NOT_FOUND.
func (s *Workflows) WorkflowVersion(ctx context.Context, w workflow.Workflow, n int) (workflow.Version, error) {
	const op = "store.WorkflowVersion"
	if w.VersionsFrom == 0 || n < w.VersionsFrom || n > w.Version {
		if n == w.Version {
			return workflow.VersionOf(w, workflow.LegacySource(w)), nil
		}
		return workflow.Version{}, workflow.VersionNotFound(op, n)
	}
	var it versionDefItem
	err := s.table.Get("PK", workflowPK(w.ID)).Range("SK", dynamo.Equal, versionDefSK(n)).One(ctx, &it)
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		return workflow.Version{}, workflow.VersionNotFound(op, n)
	case err != nil:
		return workflow.Version{}, storeError(op, err)
	}
	v := workflow.Version{VersionSummary: it.summary(), WorkflowID: it.WorkflowID, Name: it.Name, Description: it.Description,
		ExposeAsTool: it.ExposeAsTool, ToolName: it.ToolName}
	if it.InputSchema != "" {
		v.InputSchema = json.RawMessage(it.InputSchema)
	}
	if err := decodeAttr(it.PK, it.SK, "steps", it.Steps, &v.Steps); err != nil {
		return workflow.Version{}, errs.Wrap(op, err)
	}
	if v.Steps == nil {
		v.Steps = []workflow.Step{}
	}
	return v, nil
}
