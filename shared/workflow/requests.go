package workflow

import (
	"strings"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
)

// MaxContentLen bounds a workflow chat message.
const MaxContentLen = 32000

// CreateRequest is the body of POST /api/workflows.
type CreateRequest struct {
	UserID      string  `json:"userId"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
}

// Validate requires userId and a name of 1-255 characters, and bounds the
// description.
func (r CreateRequest) Validate() error {
	var f errs.FieldErrors
	if r.UserID == "" {
		f.Add("userId", "is required")
	}
	ValidateName(&f, "name", &r.Name)
	ValidateDescription(&f, "description", r.Description)
	return f.Err("workflow.CreateRequest")
}

// UpdateRequest is the body of PATCH /api/workflows/{workflowId}: name
// and/or description.
type UpdateRequest struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
}

// Validate requires at least one field and checks their lengths.
func (r UpdateRequest) Validate() error {
	var f errs.FieldErrors
	if r.Name == nil && r.Description == nil {
		e := errs.Fields("workflow.UpdateRequest", errs.FieldError{Field: "name", Message: "name or description is required"})
		e.Code = "NO_FIELDS"
		e.Message = "at least one of name or description must be provided"
		return e
	}
	if r.Name != nil {
		ValidateName(&f, "name", r.Name)
	}
	ValidateDescription(&f, "description", r.Description)
	return f.Err("workflow.UpdateRequest")
}

// ValidateName adds to f the problem of name, if any: blank, or longer
// than MaxNameLen characters. Updates and proposals check names alike.
func ValidateName(f *errs.FieldErrors, field string, name *string) {
	switch n := utf8.RuneCountInString(strings.TrimSpace(*name)); {
	case n == 0:
		f.Add(field, "is required (1-%d characters)", MaxNameLen)
	case utf8.RuneCountInString(*name) > MaxNameLen:
		f.Add(field, "must be at most %d characters", MaxNameLen)
	}
}

// ValidateDescription adds to f the problem of a description longer than
// MaxDescriptionLen characters; nil is none.
func ValidateDescription(f *errs.FieldErrors, field string, d *string) {
	if d != nil && utf8.RuneCountInString(*d) > MaxDescriptionLen {
		f.Add(field, "must be at most %d characters", MaxDescriptionLen)
	}
}
