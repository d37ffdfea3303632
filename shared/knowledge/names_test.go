package knowledge_test

import (
	"errors"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
)

// TestNameOneLine: a knowledge base's name is one line of text, on create
// and on update, as a chat title is: a control character in it is
// refused.
func TestNameOneLine(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{"Handbook": true, " Handbook ": true, "\x00ctl": false, "a\nb": false, "a\tb": false} {
		for what, err := range map[string]error{
			"create": knowledge.CreateRequest{Name: name}.Validate(),
			"update": knowledge.UpdateRequest{Name: &name}.Validate(),
		} {
			var e *errs.Error
			if ok != (err == nil) || !ok && (!errors.As(err, &e) || len(e.Details) != 1 || e.Details[0].Field != "name" || e.Details[0].Message != errs.OneLineMessage) {
				t.Errorf("%s %q: %v, want ok %v", what, name, err, ok)
			}
		}
	}
}
