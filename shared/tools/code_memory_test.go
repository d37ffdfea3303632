package tools_test

import (
	"context"
	"errors"
	"testing"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/sandbox"
	"github.com/workflowchat/service/shared/tools"
)

// TestCodeWorkerPeakWithinItsAccounting: code that grows a list of
// strings until its worker's memory limit stops it fails with
// TOOL_RESOURCE_LIMIT, and no worker's own peak resident size (VmHWM from
// /proc while it runs, and the exit status's figure as the pool reports
// it) passes tools.SandboxWorkerMemory, the size a pool's sizing
// (mcpfn.SandboxSize) counts a worker at; the pool then runs code again on
// a replaced worker. Strings of 16 MiB are the case that passed it (177
// MiB) while the heap could fill, uncounted, the unused part of its first
// arena. A call cut at its 15 s by a loaded machine (TOOL_TIMEOUT) is
// tried again; its peak counts all the same.
func TestCodeWorkerPeakWithinItsAccounting(t *testing.T) {
	r := newRegistry(t, tools.Config{}).WithSandbox(testSandbox(t))
	ctx := tools.WithCaller(context.Background(), "peak")
	for _, tc := range []struct{ name, source string }{
		{"strings_16MiB", growing16MiB},
		{"strings_32MiB", "const a = []; for (let i = 0; ; i++) a.push('x'.repeat(1 << 25) + i);"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := workerPeaks(t)
			var exitPeak int64
			limited := false
			for attempt := 0; attempt < 5 && !limited; attempt++ {
				_, err := r.Run(ctx, "code", js(tc.source, nil))
				switch errs.CodeOf(err) {
				case tools.CodeToolTimeout:
					t.Logf("attempt %d cut at its deadline: %v", attempt, err)
				case tools.CodeToolResourceLimit:
					limited = true
					var le *sandbox.LimitError
					if !errors.As(err, &le) || le.Resource != sandbox.Memory {
						t.Fatalf("%v: want the worker's memory limit", err)
					}
					exitPeak = le.PeakRSS
				default:
					t.Fatalf("%v: want TOOL_RESOURCE_LIMIT", err)
				}
			}
			sampled := stop()
			if sampled == 0 {
				t.Fatal("no worker's VmHWM could be read")
			}
			peak := max(sampled, exitPeak)
			t.Logf("peak %.1f MiB (sampled %.1f, at exit %.1f), counted %d MiB", float64(peak)/(1<<20), float64(sampled)/(1<<20), float64(exitPeak)/(1<<20), tools.SandboxWorkerMemory>>20)
			if peak > tools.SandboxWorkerMemory {
				t.Errorf("a worker peaked at %.1f MiB, above the %d MiB a worker is counted at", float64(peak)/(1<<20), tools.SandboxWorkerMemory>>20)
			}
			if !limited {
				t.Log("every attempt was cut at its deadline on this machine: the limit's error was not seen, the peak was")
			}
			out, err := r.Run(ctx, "code", js("return 6 * 7;", nil))
			if err != nil {
				t.Fatalf("after the limit: %v", err)
			}
			if got := jsonOf(t, out); got != `{"result":42}` {
				t.Fatalf("after the limit: %s", got)
			}
		})
	}
}
