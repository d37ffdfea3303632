package workflow

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
)

// MaxContentLen bounds a workflow chat message.
const MaxContentLen = 32000

// CreateRequest is the body of POST /api/workflows: name and description,
// and optionally the rest of a definition (inputSchema, steps,
// exposeAsTool, toolName), checked as a PATCH checks them.
type CreateRequest struct {
	UserID       string          `json:"userId"`
	Name         string          `json:"name"`
	Description  *string         `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	Steps        *[]Step         `json:"steps"`
	ExposeAsTool *bool           `json:"exposeAsTool"`
	ToolName     *string         `json:"toolName"`
}

// Validate requires userId and a name of 1-255 characters, and bounds the
// description and the rest of the definition (see UpdateRequest).
func (r CreateRequest) Validate() error {
	var f errs.FieldErrors
	if r.UserID == "" {
		f.Add("userId", "is required")
	}
	ValidateName(&f, "name", &r.Name)
	ValidateDescription(&f, "description", r.Description)
	validateDefinitionFields(&f, r.InputSchema, r.Steps, r.ToolName)
	return f.Err("workflow.CreateRequest")
}

// UpdateRequest is the body of PATCH /api/workflows/{workflowId}: at least
// one of name, description, inputSchema (JSON null removes it), steps (the
// whole list, replacing the workflow's), exposeAsTool and toolName (""
// removes it, and needs exposeAsTool false).
type UpdateRequest struct {
	Name         *string         `json:"name"`
	Description  *string         `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	Steps        *[]Step         `json:"steps"`
	ExposeAsTool *bool           `json:"exposeAsTool"`
	ToolName     *string         `json:"toolName"`
}

// updateFields names the fields of an UpdateRequest.
const updateFields = "name, description, inputSchema, steps, exposeAsTool or toolName"

// Validate requires at least one field and checks what can be checked
// without the workflow: lengths, the toolName pattern, the number of
// steps, and that inputSchema is an object or null.
func (r UpdateRequest) Validate() error {
	var f errs.FieldErrors
	if r.Name == nil && r.Description == nil && r.InputSchema == nil && r.Steps == nil && r.ExposeAsTool == nil && r.ToolName == nil {
		e := errs.Fields("workflow.UpdateRequest", errs.FieldError{Field: "name", Message: "one of " + updateFields + " is required"})
		e.Code = "NO_FIELDS"
		e.Message = "at least one of " + updateFields + " must be provided"
		return e
	}
	if r.Name != nil {
		ValidateName(&f, "name", r.Name)
	}
	ValidateDescription(&f, "description", r.Description)
	validateDefinitionFields(&f, r.InputSchema, r.Steps, r.ToolName)
	return f.Err("workflow.UpdateRequest")
}

// validateDefinitionFields checks the shape of the definition fields of a
// create or update: inputSchema an object (or null), at most MaxSteps
// steps, toolName empty or matching ToolNamePattern. The rest (the steps
// against the tool catalog, the schema as JSON Schema) is Definitions'.
func validateDefinitionFields(f *errs.FieldErrors, inputSchema json.RawMessage, steps *[]Step, toolName *string) {
	if t := bytes.TrimSpace(inputSchema); len(t) > 0 && t[0] != '{' && string(t) != "null" {
		f.Add("inputSchema", `must be a JSON Schema object with "type": "object", or null to remove it`)
	}
	if steps != nil && len(*steps) > MaxSteps {
		f.Add("steps", "a workflow has at most %d steps", MaxSteps)
	}
	if toolName != nil && *toolName != "" && !ValidToolName(*toolName) {
		f.Add("toolName", "must match %s (lower-case letters, digits and _, starting with a letter, at most 64)", ToolNamePattern)
	}
}

// ValidateName adds to f the problem of name, if any: blank, longer than
// MaxNameLen characters, or holding a control character (a name is one
// line). Updates and proposals check names alike.
func ValidateName(f *errs.FieldErrors, field string, name *string) {
	switch n := utf8.RuneCountInString(strings.TrimSpace(*name)); {
	case n == 0:
		f.Add(field, "is required (1-%d characters)", MaxNameLen)
	case utf8.RuneCountInString(*name) > MaxNameLen:
		f.Add(field, "must be at most %d characters", MaxNameLen)
	default:
		f.OneLine(field, *name)
	}
}

// ValidateDescription adds to f the problem of a description longer than
// MaxDescriptionLen characters; nil is none.
func ValidateDescription(f *errs.FieldErrors, field string, d *string) {
	if d != nil && utf8.RuneCountInString(*d) > MaxDescriptionLen {
		f.Add(field, "must be at most %d characters", MaxDescriptionLen)
	}
}
