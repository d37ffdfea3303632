package template_test

import (
	"fmt"

	"github.com/workflowchat/service/infra/cost/costmodel"
)

// (r) Every function's MemorySize (its own, else the Globals') is the one
// costmodel.Memory decides, the table make cost checks against each
// function's measured peak; every function has an entry and every entry
// a function.
func checkMemory(s *stack, _ *codeFacts) []string {
	var probs []string
	for _, id := range sortedKeys(s.functions) {
		mem := deref(s.functions[id].MemorySize)
		if mem == 0 && s.globalFn != nil {
			mem = deref(s.globalFn.MemorySize)
		}
		want, ok := costmodel.MemoryOf(id)
		switch {
		case !ok:
			probs = append(probs, fmt.Sprintf("%s: no entry in costmodel.Memory (infra/cost/costmodel/memory.go): add its MemorySize there, measured by make cost", id))
		case mem != want:
			probs = append(probs, fmt.Sprintf("%s: MemorySize %d, but costmodel.Memory says %d (infra/cost/costmodel/memory.go; make cost measures the peaks)", id, mem, want))
		}
	}
	for _, m := range costmodel.Memory {
		if _, ok := s.functions[m.Function]; !ok {
			probs = append(probs, fmt.Sprintf("costmodel.Memory has %s, which template.yaml does not define", m.Function))
		}
	}
	return probs
}
