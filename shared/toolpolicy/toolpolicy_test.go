package toolpolicy_test

import (
	"testing"

	"github.com/workflowchat/service/shared/toolclient"
	"github.com/workflowchat/service/shared/toolpolicy"
)

// TestDefault: only read-only, closed-world tools are allowed without
// asking.
func TestDefault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a    toolclient.Annotations
		want string
	}{
		{"read-only, closed world", toolclient.Annotations{ReadOnlyHint: true}, toolpolicy.Allow},
		{"read-only, idempotent, closed world", toolclient.Annotations{ReadOnlyHint: true, IdempotentHint: true}, toolpolicy.Allow},
		{"read-only, open world", toolclient.Annotations{ReadOnlyHint: true, OpenWorldHint: true}, toolpolicy.Ask},
		{"writes, closed world", toolclient.Annotations{}, toolpolicy.Ask},
		{"destructive", toolclient.Annotations{DestructiveHint: true}, toolpolicy.Ask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := toolpolicy.Default(tt.a); got != tt.want {
				t.Errorf("Default(%+v) = %s, want %s", tt.a, got, tt.want)
			}
		})
	}
}
