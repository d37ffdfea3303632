package mcpfn_test

import (
	"strings"
	"testing"

	"github.com/workflowchat/service/functions/assembly/mcpfn"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/tools"
)

func load(t *testing.T, vars map[string]string) config.Config {
	t.Helper()
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSandboxSize: in Lambda the pool is what the function's memory holds
// beside the server, never fewer workers than SANDBOX_PER_USER+1 (an
// error naming both variables instead); elsewhere a fixed default.
func TestSandboxSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		vars    map[string]string
		want    tools.SandboxSize
		wantErr []string
	}{
		{"local default", nil, tools.SandboxSize{Workers: 4, PerUser: 2}, nil},
		{"local, many per user", map[string]string{"SANDBOX_PER_USER": "5"}, tools.SandboxSize{Workers: 6, PerUser: 5}, nil},
		{"McpFunction's 768 MB", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "768"}, tools.SandboxSize{Workers: 3, PerUser: 2}, nil},
		{"the least for 3 workers", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "704"}, tools.SandboxSize{Workers: 3, PerUser: 2}, nil},
		{"1 GB", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024"}, tools.SandboxSize{Workers: 4, PerUser: 2}, nil},
		{"1 GB, 3 per user", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "SANDBOX_PER_USER": "3"}, tools.SandboxSize{Workers: 4, PerUser: 3}, nil},
		{"10 GB", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "10240"}, tools.SandboxSize{Workers: mcpfn.MaxSandboxWorkers, PerUser: 2}, nil},
		{"512 MB", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, tools.SandboxSize{},
			[]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512", "holds 1 sandbox workers", "SANDBOX_PER_USER=2 needs 3", "at least 704 MB"}},
		{"703 MB", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "703"}, tools.SandboxSize{}, []string{"holds 2 sandbox workers"}},
		{"128 MB", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128"}, tools.SandboxSize{}, []string{"holds 0 sandbox workers"}},
		{"768 MB, 3 per user", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "768", "SANDBOX_PER_USER": "3"}, tools.SandboxSize{},
			[]string{"SANDBOX_PER_USER=3 needs 4", "at least 872 MB"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := mcpfn.SandboxSize(load(t, tc.vars))
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("SandboxSize = %+v, want an error", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("SandboxSize = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
