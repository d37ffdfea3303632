package proposal

import (
	"github.com/workflowchat/service/shared/workflow"
)

// checkRetry checks step s's retry and timeoutSeconds, reporting under
// at: maxAttempts 1-10, backoffSeconds 0-3600, backoffRate 1-10,
// timeoutSeconds 1-900; a human step takes neither (its wait has its own
// timeout), a forEach step no retry (each element is one call of the
// step).
func (e *edit) checkRetry(at string, s workflow.Step) {
	if t := s.TimeoutSeconds; t != nil {
		switch {
		case s.ToolID == workflow.AskHumanToolID:
			e.probs.Add(at+".timeoutSeconds", "does not apply to %s: its inputs' timeoutSeconds bounds the wait for an answer", workflow.AskHumanToolID)
		case s.ToolID == workflow.RunWorkflowToolID:
			e.probs.Add(at+".timeoutSeconds", "does not apply to %s: the child run's own steps have their timeouts", workflow.RunWorkflowToolID)
		case *t < 1 || *t > workflow.MaxStepTimeoutSeconds:
			e.probs.Add(at+".timeoutSeconds", "must be an integer from 1 to %d", workflow.MaxStepTimeoutSeconds)
		}
	}
	r := s.Retry
	if r == nil {
		return
	}
	switch {
	case s.ToolID == workflow.AskHumanToolID:
		e.probs.Add(at+".retry", "does not apply to %s, which asks a person once", workflow.AskHumanToolID)
		return
	case s.ToolID == workflow.RunWorkflowToolID:
		e.probs.Add(at+".retry", "does not apply to %s: give the child workflow's steps their retry", workflow.RunWorkflowToolID)
		return
	case s.ForEach != "":
		e.probs.Add(at+".retry", "does not apply to a step with forEach")
		return
	}
	if v := r.MaxAttempts; v != nil && (*v < 1 || *v > workflow.MaxStepAttempts) {
		e.probs.Add(at+".retry.maxAttempts", "must be an integer from 1 to %d (default 1)", workflow.MaxStepAttempts)
	}
	if v := r.BackoffSeconds; v != nil && (*v < 0 || *v > workflow.MaxBackoffSeconds) {
		e.probs.Add(at+".retry.backoffSeconds", "must be from 0 to %d seconds (default %d)", workflow.MaxBackoffSeconds, workflow.DefaultBackoffSeconds)
	}
	if v := r.BackoffRate; v != nil && (*v < 1 || *v > workflow.MaxBackoffRate) {
		e.probs.Add(at+".retry.backoffRate", "must be from 1 to %d (default %d)", workflow.MaxBackoffRate, workflow.DefaultBackoffRate)
	}
}
