package authserver

import (
	"errors"
	"testing"

	"github.com/workflowchat/service/shared/errs"
)

// TestTokenNameOneLine: a personal access token's name is one line of
// text, as a chat title is: a control character in it is refused.
func TestTokenNameOneLine(t *testing.T) {
	t.Parallel()
	days := 30
	for name, ok := range map[string]bool{"my script": true, " my script ": true, "\x00ctl": false, "a\nb": false, "a\tb": false, "a\x1b[31m": false} {
		err := TokenRequest{Name: name, ExpiresInDays: &days}.Validate()
		var e *errs.Error
		if ok != (err == nil) || !ok && (!errors.As(err, &e) || len(e.Details) != 1 || e.Details[0].Field != "name" || e.Details[0].Message != errs.OneLineMessage) {
			t.Errorf("%q: %v, want ok %v", name, err, ok)
		}
	}
}
