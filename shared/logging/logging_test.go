package logging_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/logging"
)

func TestRedactsSecrets(t *testing.T) {
	t.Parallel()
	for _, f := range []logging.Format{logging.JSON, logging.Text} {
		var buf bytes.Buffer
		l := logging.New(&buf, f, slog.LevelDebug)
		l.Info("event", "password", "hunter2", "sessionToken", "tok-123", "X-Service-Key", "key-456",
			slog.Group("req", "Authorization", "Bearer abc789", "cookie", "session_token=zzz"), "user", "ada")
		out := buf.String()
		for _, secret := range []string{"hunter2", "tok-123", "key-456", "abc789", "zzz"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s log leaks %q: %s", f, secret, out)
			}
		}
		if !strings.Contains(out, "ada") || !strings.Contains(out, logging.Redacted) {
			t.Errorf("%s log lost ordinary attributes or redaction marker: %s", f, out)
		}
	}
}

func TestContextLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := logging.New(&buf, logging.JSON, slog.LevelInfo).With("requestId", "r-1")
	logging.FromContext(logging.WithLogger(context.Background(), l)).Info("hello")
	if !strings.Contains(buf.String(), `"requestId":"r-1"`) {
		t.Errorf("log = %s", buf.String())
	}
	if logging.FromContext(context.Background()) != slog.Default() {
		t.Error("no default logger without a context logger")
	}
}
