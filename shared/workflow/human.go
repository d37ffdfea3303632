package workflow

import (
	"encoding/json"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
)

// A human step (AskHumanToolID) as the run engine carries it out: the
// tool's input and output (its schemas are in the tool catalog; this is
// the same contract in Go, for the engine, which never sends the step to
// the tool server).
const (
	// OnTimeoutFail fails the run when no one answered in time (the
	// default); OnTimeoutContinue completes the step with approved false
	// and timedOut true.
	OnTimeoutFail     = "fail"
	OnTimeoutContinue = "continue"
	// MaxHumanMessageLen bounds the message, in characters.
	MaxHumanMessageLen = 4000
	// MaxHumanTimeout bounds timeoutSeconds (30 days).
	MaxHumanTimeout = 30 * 24 * time.Hour
)

// HumanRequest is the resolved input of a human step.
type HumanRequest struct {
	Message string
	// InputSchema is the JSON Schema of the values the person may give
	// (check them with inputschema.Check and Schema.ValidateField); empty
	// when none.
	InputSchema json.RawMessage
	// Timeout is how long to wait; 0 means no limit.
	Timeout   time.Duration
	OnTimeout string
}

// ParseHumanRequest reads a human step's resolved inputs. Errors: Invalid
// INVALID_PARAMS naming the field (message missing, empty or over 4000
// characters; inputSchema not an object; timeoutSeconds not a whole
// number from 1 to 2592000; onTimeout not fail or continue; an unknown
// field), for inputs a template filled with what the tool's schema
// refuses.
func ParseHumanRequest(inputs map[string]any) (HumanRequest, error) {
	const op = "workflow.ParseHumanRequest"
	var f errs.FieldErrors
	r := HumanRequest{OnTimeout: OnTimeoutFail}
	for k, v := range inputs {
		switch k {
		case "message":
			s, ok := v.(string)
			switch n := utf8.RuneCountInString(s); {
			case !ok || strings.TrimSpace(s) == "":
				f.Add("message", "must be a non-empty string")
			case n > MaxHumanMessageLen:
				f.Add("message", "must be at most %d characters", MaxHumanMessageLen)
			default:
				r.Message = s
			}
		case "inputSchema":
			if _, ok := v.(map[string]any); !ok {
				f.Add("inputSchema", "must be a JSON Schema object")
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				f.Add("inputSchema", "must be a JSON Schema object")
				continue
			}
			r.InputSchema = b
		case "timeoutSeconds":
			n, ok := v.(float64)
			if !ok || n != math.Trunc(n) || n < 1 || n > MaxHumanTimeout.Seconds() {
				f.Add("timeoutSeconds", "must be a whole number of seconds from 1 to %d", int(MaxHumanTimeout.Seconds()))
				continue
			}
			r.Timeout = time.Duration(n) * time.Second
		case "onTimeout":
			s, _ := v.(string)
			if s != OnTimeoutFail && s != OnTimeoutContinue {
				f.Add("onTimeout", "must be fail or continue")
				continue
			}
			r.OnTimeout = s
		default:
			f.Add(k, "is not an input of %s", AskHumanToolID)
		}
	}
	if _, ok := inputs["message"]; !ok {
		f.Add("message", "is required")
	}
	if len(f) > 0 {
		e := errs.Fields(op, f...)
		e.Code = "INVALID_PARAMS"
		return HumanRequest{}, e
	}
	return r, nil
}

// HumanAnswer is the output of a human step.
type HumanAnswer struct {
	Approved    bool           `json:"approved"`
	Values      map[string]any `json:"values"`
	RespondedAt time.Time      `json:"respondedAt"`
	TimedOut    bool           `json:"timedOut"`
}

// Output returns the answer as the step's output: every output the step
// declares (approved, values, respondedAt, timedOut), so later steps may
// read any of them.
func (a HumanAnswer) Output() map[string]any {
	values := a.Values
	if values == nil {
		values = map[string]any{}
	}
	return map[string]any{"approved": a.Approved, "values": values, "respondedAt": a.RespondedAt.UTC().Format(time.RFC3339Nano), "timedOut": a.TimedOut}
}
