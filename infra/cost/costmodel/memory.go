package costmodel

import (
	"fmt"
	"math"
	"slices"
)

// The rule that sizes a function's memory from its measured peak (make
// cost measures the peaks): at least Headroom times the peak, rounded up
// to a multiple of MemoryStepMB, and never under MinMemoryMB, Lambda's
// least.
//
// Why twice the peak: Go's collector lets the heap grow to twice what is
// live before it collects (GOGC=100, and nothing sets a memory limit),
// and the workload's requests are typical ones: a function's bounded
// worst case (a request body at its limit, a 400 KB item, a tool output
// at its cap, held a few times while decoded and encoded) is larger. A
// function over its memory is killed mid-request, a cost far above the
// megabytes saved.
const (
	Headroom     = 2.0
	MemoryStepMB = 64
	MinMemoryMB  = 128
)

// RuleText says the rule in the report.
const RuleText = "the rule: at least twice the peak, rounded up to 64 MB, at least 128 MB"

// RuleMB is the least MemorySize the rule allows a function whose
// measured peak is peakMiB (Lambda's MB are MiB).
func RuleMB(peakMiB float64) int {
	mb := int(math.Ceil(peakMiB*Headroom/MemoryStepMB)) * MemoryStepMB
	return max(mb, MinMemoryMB)
}

// FunctionMemory is a function's MemorySize in template.yaml and, when
// it is above what the rule asks, why.
type FunctionMemory struct {
	// Function is the function's logical id.
	Function string
	// MB is its MemorySize.
	MB int
	// Why says what besides memory decides MB (CPU, which Lambda gives in
	// proportion to memory; a pool sized from the memory); empty when the
	// rule alone does.
	Why string
}

// Memory is every function's MemorySize, the one place it is decided:
// template.yaml must say the same (infra/template checks it), and make
// cost checks each against the rule and the function's measured peak.
var Memory = []FunctionMemory{
	{Function: "HealthFunction", MB: 128},
	{Function: "AuthFunction", MB: 1024, Why: "argon2id (19 MiB, t=2) is CPU-bound: Lambda's CPU grows with memory, and at 1024 MB a sign-in hashes in a fraction of a second"},
	{Function: "ModelsFunction", MB: 128},
	{Function: "ToolsFunction", MB: 128},
	{Function: "McpFunction", MB: 768, Why: "the sandbox of the isolated tools is sized from it (mcpfn.SandboxSize): 200 MiB kept for the server, then a worker per 168 MiB, its worst case; 768 holds 3 workers, one more than a user may hold (SANDBOX_PER_USER, default 2), and under 704 the function refuses to start"},
	{Function: "ChatsFunction", MB: 128},
	{Function: "StreamFunction", MB: 128},
	{Function: "SweeperFunction", MB: 128},
	{Function: "WorkflowsFunction", MB: 128},
	{Function: "RunnerFunction", MB: 320, Why: "a step's output, up to the isolated tools' 8 MiB cap, is held a few times while it is checkpointed: " +
		"with a 7.96 MiB output the runner peaked at 112 to 129 MiB in different runs, whose twice falls either side of 256; 320 holds the highest"},
	{Function: "TriggerFireFunction", MB: 128},
	{Function: "TriggersFunction", MB: 128},
	{Function: "OAuthFunction", MB: 1024, Why: "its sign-in page verifies passwords with argon2id, CPU-bound as AuthFunction's"},
	{Function: "McpGatewayFunction", MB: 128},
	{Function: "McpServersFunction", MB: 128},
	{Function: "KnowledgeFunction", MB: 1024, Why: "a 25 MiB document is held as bytes, text and chunks at once while it is indexed, and a query holds a knowledge base's vectors and segments (docs/benchmarks.md, Knowledge)"},
	{Function: "KnowledgeIndexFunction", MB: 1024, Why: "one indexing attempt holds a 25 MiB document as bytes, text and chunks at once, with its vectors (docs/benchmarks.md, Knowledge: 384 MiB of dev server RSS indexing one)"},
}

// MemoryOf is the MemorySize of function (a logical id); false when
// Memory has no entry.
func MemoryOf(function string) (int, bool) {
	i := slices.IndexFunc(Memory, func(m FunctionMemory) bool { return m.Function == function })
	if i < 0 {
		return 0, false
	}
	return Memory[i].MB, true
}

// MemoryCheck is one function's MemorySize against its measured peak.
type MemoryCheck struct {
	FunctionMemory
	Peak FunctionPeak
	// RuleMB is what the rule asks for the peak.
	RuleMB int
	// Measured is false when the workload did not run the function.
	Measured bool
}

// OK reports whether the MemorySize holds the rule: at least RuleMB, and
// no more unless Why says why.
func (c MemoryCheck) OK() bool {
	if !c.Measured {
		return false
	}
	return c.MB >= c.RuleMB && (c.MB == c.RuleMB || c.Why != "")
}

func (c MemoryCheck) String() string {
	if !c.Measured {
		return fmt.Sprintf("%-20s %5d MB  not measured by the workload", c.Function, c.MB)
	}
	verdict := "follows the rule"
	switch {
	case c.MB < c.RuleMB:
		verdict = fmt.Sprintf("TOO SMALL: the rule asks %d MB", c.RuleMB)
	case c.MB > c.RuleMB && c.Why == "":
		verdict = fmt.Sprintf("ABOVE THE RULE, with no reason given: the rule asks %d MB", c.RuleMB)
	case c.MB > c.RuleMB:
		verdict = fmt.Sprintf("above the rule's %d MB: %s", c.RuleMB, c.Why)
	}
	return fmt.Sprintf("%-20s %5d MB  peak %5.1f MiB over %d invocations; %s", c.Function, c.MB, c.Peak.PeakMiB, c.Peak.Invocations, verdict)
}

// CheckMemory checks every function of Memory against its peak in peaks.
func CheckMemory(peaks []FunctionPeak) []MemoryCheck {
	out := make([]MemoryCheck, 0, len(Memory))
	for _, m := range Memory {
		c := MemoryCheck{FunctionMemory: m}
		if i := slices.IndexFunc(peaks, func(p FunctionPeak) bool { return p.Function == m.Function }); i >= 0 {
			c.Peak, c.Measured, c.RuleMB = peaks[i], true, RuleMB(peaks[i].PeakMiB)
		}
		out = append(out, c)
	}
	return out
}
