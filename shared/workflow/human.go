package workflow

import "github.com/workflowchat/service/shared/askhuman"

// A human step (AskHumanToolID) as the run engine carries it out: its
// contract, the same the tool catalog shows, is package askhuman's; these
// names are the engine's view of it.
const (
	// OnTimeoutFail fails the run when no one answered in time (the
	// default); OnTimeoutContinue completes the step with approved false
	// and timedOut true.
	OnTimeoutFail     = askhuman.OnTimeoutFail
	OnTimeoutContinue = askhuman.OnTimeoutContinue
)

// HumanRequest is the resolved input of a human step.
type HumanRequest = askhuman.Request

// HumanAnswer is the output of a human step.
type HumanAnswer = askhuman.Answer

// ParseHumanRequest reads a human step's resolved inputs (askhuman.Parse):
// Invalid INVALID_PARAMS naming the field the tool's input schema refuses.
func ParseHumanRequest(inputs map[string]any) (HumanRequest, error) { return askhuman.Parse(inputs) }
