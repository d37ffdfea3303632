// Package askhuman is the contract of ask_human, the human step: a
// workflow step that pauses the run until a person answers. Its id, input
// fields, bounds, default and output are declared here once; the tool
// catalog shows them as JSON Schemas (InputSchema, OutputSchema) and the
// run engine reads a step's inputs with Parse and writes its output with
// Answer.Output, so the two cannot drift apart.
package askhuman

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/workflowchat/service/shared/errs"
)

// ID is the tool id of a human step.
const ID = "ask_human"

// The input fields of a human step.
const (
	FieldMessage        = "message"
	FieldInputSchema    = "inputSchema"
	FieldTimeoutSeconds = "timeoutSeconds"
	FieldOnTimeout      = "onTimeout"
)

// What happens at the timeout: OnTimeoutFail fails the run (the default);
// OnTimeoutContinue completes the step with approved false and timedOut
// true.
const (
	OnTimeoutFail     = "fail"
	OnTimeoutContinue = "continue"
)

// Bounds of the inputs: the message in characters, timeoutSeconds from
// MinTimeout to MaxTimeout (30 days).
const (
	MaxMessageLen = 4000
	MinTimeout    = time.Second
	MaxTimeout    = 30 * 24 * time.Hour
)

// maxSeconds is MaxTimeout in whole seconds, as timeoutSeconds takes it.
const maxSeconds = int(MaxTimeout / time.Second)

// Description is the tool's description in the catalog.
var Description = "Workflow steps only: pauses the workflow run until a person approves or rejects, optionally giving values, then continues. " +
	"It cannot be called directly. Fields: message (what to ask), inputSchema (a JSON Schema object describing the values the person may give), " +
	fmt.Sprintf("timeoutSeconds (how long to wait, %d to %d; default: no limit), ", int(MinTimeout/time.Second), maxSeconds) +
	"onTimeout (fail, the default: the run fails; continue: the step completes with approved false and timedOut true). " +
	"Later steps read approved, values, respondedAt and timedOut, e.g. an if of \"review.approved\". " +
	`Example: {"message": "Publish this summary?", "inputSchema": {"type": "object", "properties": {"note": {"type": "string"}}}, "timeoutSeconds": 86400}.`

// InputSchema is the JSON Schema of a human step's inputs.
var InputSchema = []byte(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    %q: {"type": "string", "minLength": 1, "maxLength": %d, "pattern": "\\S", "description": "What to ask the person, shown with the run.", "examples": ["Publish this summary?"]},
    %q: {"type": "object", "description": "A JSON Schema object (\"type\": \"object\") for the values the person gives with the answer; omitted: no values."},
    %q: {"type": "integer", "minimum": %d, "maximum": %d, "description": "How long to wait for an answer, in seconds (at most 30 days). Omitted: wait until the run is cancelled."},
    %q: {"type": "string", "enum": [%q, %q], "default": %q, "description": "At the timeout: fail the run, or continue with approved false and timedOut true."}
  },
  "required": [%q],
  "additionalProperties": false
}`, FieldMessage, MaxMessageLen, FieldInputSchema, FieldTimeoutSeconds, int(MinTimeout/time.Second), maxSeconds,
	FieldOnTimeout, OnTimeoutFail, OnTimeoutContinue, OnTimeoutFail, FieldMessage))

// OutputSchema is the JSON Schema of a human step's output (Answer.Output).
var OutputSchema = []byte(`{
  "type": "object",
  "properties": {
    "approved": {"type": "boolean", "description": "Whether the person approved (false after a timeout)."},
    "values": {"type": "object", "description": "The values the person gave, valid against the step's inputSchema; {} when none (a rejection or a timeout may give none, whatever the schema requires)."},
    "respondedAt": {"type": "string", "format": "date-time", "description": "When the person answered, or when the wait timed out."},
    "timedOut": {"type": "boolean", "description": "True when no one answered in time and onTimeout is continue."}
  },
  "required": ["approved", "values", "respondedAt"],
  "additionalProperties": false
}`)

// Request is the resolved input of a human step.
type Request struct {
	Message string
	// InputSchema is the JSON Schema of the values the person may give
	// (check them with inputschema.Check and Schema.ValidateField); empty
	// when none.
	InputSchema json.RawMessage
	// Timeout is how long to wait; 0 means no limit.
	Timeout   time.Duration
	OnTimeout string
}

// Parse reads a human step's resolved inputs. Errors: Invalid
// INVALID_PARAMS naming the field (message missing, empty or over
// MaxMessageLen characters; inputSchema not an object; timeoutSeconds not
// a whole number from 1 to 2592000; onTimeout not fail or continue; an
// unknown field), for inputs a template filled with what InputSchema
// refuses.
func Parse(inputs map[string]any) (Request, error) {
	const op = "askhuman.Parse"
	var f errs.FieldErrors
	r := Request{OnTimeout: OnTimeoutFail}
	for k, v := range inputs {
		switch k {
		case FieldMessage:
			s, ok := v.(string)
			switch n := utf8.RuneCountInString(s); {
			case !ok || strings.TrimSpace(s) == "":
				f.Add(k, "must be a non-empty string")
			case n > MaxMessageLen:
				f.Add(k, "must be at most %d characters", MaxMessageLen)
			default:
				r.Message = s
			}
		case FieldInputSchema:
			if _, ok := v.(map[string]any); !ok {
				f.Add(k, "must be a JSON Schema object")
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				f.Add(k, "must be a JSON Schema object")
				continue
			}
			r.InputSchema = b
		case FieldTimeoutSeconds:
			n, ok := v.(float64)
			if !ok || n != math.Trunc(n) || n < MinTimeout.Seconds() || n > MaxTimeout.Seconds() {
				f.Add(k, "must be a whole number of seconds from %d to %d", int(MinTimeout/time.Second), maxSeconds)
				continue
			}
			r.Timeout = time.Duration(n) * time.Second
		case FieldOnTimeout:
			s, _ := v.(string)
			if s != OnTimeoutFail && s != OnTimeoutContinue {
				f.Add(k, "must be %s or %s", OnTimeoutFail, OnTimeoutContinue)
				continue
			}
			r.OnTimeout = s
		default:
			f.Add(k, "is not an input of %s", ID)
		}
	}
	if _, ok := inputs[FieldMessage]; !ok {
		f.Add(FieldMessage, "is required")
	}
	if len(f) > 0 {
		e := errs.Fields(op, f...)
		e.Code = "INVALID_PARAMS"
		return Request{}, e
	}
	return r, nil
}

// Answer is the output of a human step.
type Answer struct {
	Approved    bool           `json:"approved"`
	Values      map[string]any `json:"values"`
	RespondedAt time.Time      `json:"respondedAt"`
	TimedOut    bool           `json:"timedOut"`
}

// Output returns the answer as the step's output: every output
// OutputSchema declares (approved, values, respondedAt, timedOut), so
// later steps may read any of them.
func (a Answer) Output() map[string]any {
	values := a.Values
	if values == nil {
		values = map[string]any{}
	}
	return map[string]any{"approved": a.Approved, "values": values, "respondedAt": a.RespondedAt.UTC().Format(time.RFC3339Nano), "timedOut": a.TimedOut}
}
