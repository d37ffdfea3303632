package workflow_test

import (
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/workflow"
)

// TestNameOneLine: a workflow's name (on create, update and in proposals,
// which share ValidateName) is one line of text, as a chat title is: a
// control character in it is refused.
func TestNameOneLine(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{"Digest": true, " Digest ": true, "\x00ctl": false, "a\nb": false, "a\tb": false} {
		var f errs.FieldErrors
		workflow.ValidateName(&f, "name", &name)
		if ok != (len(f) == 0) || !ok && (len(f) != 1 || f[0].Field != "name" || f[0].Message != errs.OneLineMessage) {
			t.Errorf("%q: %+v, want ok %v", name, f, ok)
		}
	}
}
