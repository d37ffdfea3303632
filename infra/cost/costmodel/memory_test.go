package costmodel_test

import (
	"strings"
	"testing"

	"github.com/workflowchat/service/infra/cost/costmodel"
)

func TestRuleMB(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		peak float64
		want int
	}{
		{0, 128}, {10, 128}, {64, 128}, {64.1, 192}, {96, 192}, {96.5, 256}, {300, 640},
	} {
		if got := costmodel.RuleMB(c.peak); got != c.want {
			t.Errorf("RuleMB(%v) = %d, want %d", c.peak, got, c.want)
		}
	}
}

// TestMemoryTable: one entry per function, sizes Lambda accepts, and a
// reason wherever a size is above the least the rule allows.
func TestMemoryTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, m := range costmodel.Memory {
		if seen[m.Function] || !strings.HasSuffix(m.Function, "Function") {
			t.Errorf("%q: duplicate or not a function's logical id", m.Function)
		}
		seen[m.Function] = true
		if m.MB < costmodel.MinMemoryMB || m.MB > 10240 || m.MB%costmodel.MemoryStepMB != 0 {
			t.Errorf("%s: %d MB", m.Function, m.MB)
		}
		if mb, ok := costmodel.MemoryOf(m.Function); !ok || mb != m.MB {
			t.Errorf("MemoryOf(%s) = %d, %v", m.Function, mb, ok)
		}
	}
	if _, ok := costmodel.MemoryOf("NoSuchFunction"); ok {
		t.Error("MemoryOf found a function that is not in the table")
	}
}

func TestCheckMemory(t *testing.T) {
	t.Parallel()
	first := costmodel.Memory[0]
	peakFor := func(mb int) float64 { return float64(mb) / costmodel.Headroom } // exactly at the rule
	checks := costmodel.CheckMemory([]costmodel.FunctionPeak{{Function: first.Function, PeakMiB: peakFor(first.MB), Invocations: 3}})
	if len(checks) != len(costmodel.Memory) {
		t.Fatalf("%d checks for %d functions", len(checks), len(costmodel.Memory))
	}
	if c := checks[0]; !c.Measured || c.RuleMB != first.MB || !c.OK() || !strings.Contains(c.String(), "follows the rule") {
		t.Errorf("at the rule: %+v %q", c, c)
	}
	if c := checks[1]; c.Measured || c.OK() || !strings.Contains(c.String(), "not measured") {
		t.Errorf("without a peak: %+v %q", c, c)
	}
	over := costmodel.CheckMemory([]costmodel.FunctionPeak{{Function: first.Function, PeakMiB: float64(first.MB), Invocations: 1}})[0]
	if over.OK() || !strings.Contains(over.String(), "TOO SMALL") {
		t.Errorf("a peak of the whole MemorySize: %q", over)
	}
	if first.Why == "" {
		under := costmodel.CheckMemory([]costmodel.FunctionPeak{{Function: first.Function, PeakMiB: 1, Invocations: 1}})[0]
		if first.MB > costmodel.MinMemoryMB && (under.OK() || !strings.Contains(under.String(), "ABOVE THE RULE")) {
			t.Errorf("a tiny peak, no reason: %q", under)
		}
	}
}
