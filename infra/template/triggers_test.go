package template_test

// The schedule triggers' AWS side: the EventBridge Scheduler group, the
// role Scheduler delivers fires with, the function that receives them and
// their dead-letter queue, and who may manage the schedules.

import (
	"fmt"
	"slices"
	"strings"
)

const (
	scheduleGroupID = "TriggerScheduleGroup"
	schedulerRoleID = "TriggerSchedulerRole"
	// fireID is the schedules' target (functions/triggerfire): no route,
	// URL or schedule; EventBridge Scheduler invokes it through the role.
	fireID           = "TriggerFireFunction"
	triggersID       = "TriggersFunction"
	signingKeyParam  = "WebhookSigningKey"
	minSigningKeyLen = 32
	// groupSchedules is the ARN pattern of the group's schedules.
	groupSchedules = subMark + "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${" + scheduleGroupID + "}/*"
)

// scheduleManagers are the functions that manage schedules, with exactly
// the actions their code calls (eventbridge.Scheduler): TriggersFunction
// puts and deletes them with the triggers, WorkflowsFunction deletes a
// deleted workflow's.
var scheduleManagers = map[string][]string{
	triggersID:          {"scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:UpdateSchedule"},
	"WorkflowsFunction": {"scheduler:DeleteSchedule"},
	// Account erasure deletes the user's workflows with their triggers.
	"SweeperFunction": {"scheduler:DeleteSchedule"},
}

// isSchedulerStatement reports whether a policy statement grants
// EventBridge Scheduler or iam:PassRole actions (this file's checks).
func isSchedulerStatement(stmt map[string]any) bool {
	for _, a := range strs(stmt["Action"]) {
		if strings.HasPrefix(a, "scheduler:") || a == "iam:PassRole" {
			return true
		}
	}
	return false
}

// functionStatements returns the inline policy statements of function id.
func functionStatements(s *stack, id string) []map[string]any {
	var out []map[string]any
	docs, _ := asMap(s.resources()[id]["Properties"])["Policies"].([]any)
	for _, d := range docs {
		stmts, _ := asMap(d)["Statement"].([]any)
		for _, st := range stmts {
			out = append(out, asMap(st))
		}
	}
	return out
}

// (n) Schedule triggers: the group exists; only the scheduleManagers may
// call Scheduler, each with exactly its actions, on the group's schedules
// only, and receives the group's name; only TriggersFunction may pass a
// role, the scheduler role only and to Scheduler only, and receives the
// target, role and queue ARNs and the signing key (a NoEcho parameter of
// at least 32 characters, never an output); the scheduler role is
// assumable by Scheduler alone (for this account's schedules) and may only
// invoke the fire function and send to its dead-letter queue; the fire
// function has no route, URL or schedule, and its failed events go to the
// same queue.
func checkTriggerSchedules(s *stack, _ *codeFacts) []string {
	var probs []string
	res := s.resources()
	if t := s.resourceType(scheduleGroupID); t != "AWS::Scheduler::ScheduleGroup" {
		probs = append(probs, fmt.Sprintf("%s: type %q, want AWS::Scheduler::ScheduleGroup", scheduleGroupID, t))
	}
	for _, id := range sortedKeys(s.functions) {
		var actions []string
		passRoles := 0
		for _, stmt := range functionStatements(s, id) {
			if !isSchedulerStatement(stmt) {
				continue
			}
			acts, rs := strs(stmt["Action"]), strs(stmt["Resource"])
			if stmt["Effect"] != "Allow" {
				probs = append(probs, fmt.Sprintf("%s: scheduler statement with Effect %v", id, stmt["Effect"]))
			}
			if slices.Contains(acts, "iam:PassRole") {
				passRoles++
				cond := asMap(asMap(stmt["Condition"])["StringEquals"])
				if id != triggersID || len(acts) != 1 || !slices.Equal(rs, []string{getAttMark + schedulerRoleID + ".Arn"}) ||
					cond["iam:PassedToService"] != "scheduler.amazonaws.com" {
					probs = append(probs, fmt.Sprintf("%s: PassRole statement %v, want iam:PassRole alone in %s, on !GetAtt %s.Arn, conditioned on iam:PassedToService scheduler.amazonaws.com",
						id, stmt, triggersID, schedulerRoleID))
				}
				continue
			}
			for _, a := range acts {
				if !strings.HasPrefix(a, "scheduler:") {
					probs = append(probs, fmt.Sprintf("%s: a scheduler statement also grants %s", id, a))
				}
			}
			if !slices.Equal(rs, []string{groupSchedules}) {
				probs = append(probs, fmt.Sprintf("%s: scheduler actions on %v, want the group's schedules only (%s)", id, rs, groupSchedules))
			}
			actions = append(actions, acts...)
		}
		slices.Sort(actions)
		if want := scheduleManagers[id]; !slices.Equal(actions, want) {
			probs = append(probs, fmt.Sprintf("%s: scheduler actions %v, want %v", id, actions, want))
		}
		env := s.env(s.functions[id])
		if got, has := env["SCHEDULE_GROUP"]; has != (scheduleManagers[id] != nil) || has && got != refMark+scheduleGroupID {
			probs = append(probs, fmt.Sprintf("%s: SCHEDULE_GROUP %q, want !Ref %s exactly in %v", id, got, scheduleGroupID, sortedKeys(scheduleManagers)))
		}
		if id == triggersID && passRoles != 1 {
			probs = append(probs, fmt.Sprintf("%s: %d iam:PassRole statements, want 1 (a schedule names the scheduler role)", id, passRoles))
		}
		if id != triggersID {
			for _, k := range []string{"SCHEDULE_TARGET_ARN", "SCHEDULE_ROLE_ARN", "SCHEDULE_DLQ_ARN", "WEBHOOK_SIGNING_KEY"} {
				if _, has := env[k]; has {
					probs = append(probs, fmt.Sprintf("%s: receives %s, which only %s needs", id, k, triggersID))
				}
			}
		}
	}

	// The fire function and its queue.
	fire, ok := s.functions[fireID]
	if !ok {
		return append(probs, fireID+": missing; nothing would receive the schedules' fires")
	}
	if len(fire.Events) > 0 || fire.FunctionUrlConfig != nil {
		probs = append(probs, fireID+": has events or a function URL; only EventBridge Scheduler invokes it, through "+schedulerRoleID)
	}
	dest, _ := asMap(asMap(asMap(asMap(res[fireID]["Properties"])["EventInvokeConfig"])["DestinationConfig"])["OnFailure"])["Destination"].(string)
	queue, _ := strings.CutSuffix(strings.TrimPrefix(dest, getAttMark), ".Arn")
	if !strings.HasPrefix(dest, getAttMark) || res[queue]["Type"] != "AWS::SQS::Queue" {
		probs = append(probs, fmt.Sprintf("%s: EventInvokeConfig OnFailure %q, want !GetAtt <Queue>.Arn of a queue in the template", fireID, dest))
	}
	queueARN := getAttMark + queue + ".Arn"

	// TriggersFunction's environment names the same resources.
	if tf, ok := s.functions[triggersID]; !ok {
		probs = append(probs, triggersID+": missing; the trigger routes have no function")
	} else {
		env := s.env(tf)
		for k, want := range map[string]string{
			"SCHEDULE_TARGET_ARN": getAttMark + fireID + ".Arn",
			"SCHEDULE_ROLE_ARN":   getAttMark + schedulerRoleID + ".Arn",
			"SCHEDULE_DLQ_ARN":    queueARN,
			"WEBHOOK_SIGNING_KEY": refMark + signingKeyParam,
		} {
			if env[k] != want {
				probs = append(probs, fmt.Sprintf("%s: %s = %q, want %q", triggersID, k, env[k], want))
			}
		}
	}
	param := asMap(asMap(s.raw["Parameters"])[signingKeyParam])
	if n, _ := param["MinLength"].(float64); param["NoEcho"] != true || n < minSigningKeyLen {
		probs = append(probs, fmt.Sprintf("Parameters.%s: %v, want NoEcho and MinLength of at least %d", signingKeyParam, param, minSigningKeyLen))
	}
	for _, name := range sortedKeys(s.tmpl.Outputs) {
		if v := fmt.Sprint(s.tmpl.Outputs[name].Value); strings.Contains(v, signingKeyParam) {
			probs = append(probs, fmt.Sprintf("Outputs.%s reveals the webhook signing key", name))
		}
	}

	// The scheduler role.
	role := asMap(res[schedulerRoleID]["Properties"])
	if s.resourceType(schedulerRoleID) != "AWS::IAM::Role" {
		return append(probs, schedulerRoleID+": missing or not an AWS::IAM::Role")
	}
	trust, _ := asMap(role["AssumeRolePolicyDocument"])["Statement"].([]any)
	if len(trust) != 1 {
		probs = append(probs, fmt.Sprintf("%s: %d trust statements, want 1", schedulerRoleID, len(trust)))
	}
	for _, st := range trust {
		stmt := asMap(st)
		services := strs(asMap(stmt["Principal"])["Service"])
		account := asMap(asMap(stmt["Condition"])["StringEquals"])["aws:SourceAccount"]
		if stmt["Effect"] != "Allow" || !slices.Equal(services, []string{"scheduler.amazonaws.com"}) ||
			!slices.Equal(strs(stmt["Action"]), []string{"sts:AssumeRole"}) || account != refMark+"AWS::AccountId" {
			probs = append(probs, fmt.Sprintf("%s: trust %v, want scheduler.amazonaws.com alone, sts:AssumeRole, for this account's schedules (aws:SourceAccount)", schedulerRoleID, stmt))
		}
	}
	if _, ok := role["ManagedPolicyArns"]; ok {
		probs = append(probs, schedulerRoleID+": managed policies are too broad; inline statements only")
	}
	wantGrants := map[string]string{"lambda:InvokeFunction": getAttMark + fireID + ".Arn", "sqs:SendMessage": queueARN}
	got := map[string]string{}
	pols, _ := role["Policies"].([]any)
	for _, p := range pols {
		stmts, _ := asMap(asMap(p)["PolicyDocument"])["Statement"].([]any)
		for _, st := range stmts {
			stmt := asMap(st)
			acts, rs := strs(stmt["Action"]), strs(stmt["Resource"])
			if stmt["Effect"] != "Allow" || len(acts) != 1 || len(rs) != 1 {
				probs = append(probs, fmt.Sprintf("%s: statement %v, want one action on one resource", schedulerRoleID, stmt))
				continue
			}
			if _, dup := got[acts[0]]; dup {
				probs = append(probs, fmt.Sprintf("%s: %s granted twice", schedulerRoleID, acts[0]))
			}
			got[acts[0]] = rs[0]
		}
	}
	for a, r := range got {
		if wantGrants[a] != r {
			probs = append(probs, fmt.Sprintf("%s: %s on %s, want only %v", schedulerRoleID, a, r, wantGrants))
		}
	}
	for a, r := range wantGrants {
		if got[a] != r {
			probs = append(probs, fmt.Sprintf("%s: lacks %s on %s", schedulerRoleID, a, r))
		}
	}
	return probs
}

// triggerCases break the triggers' resources the ways check (n) guards
// against.
var triggerCases = []brokenCase{
	{"scheduler role invokes anything", "n_trigger_schedules",
		"                Action: [lambda:InvokeFunction]\n                Resource: [!GetAtt TriggerFireFunction.Arn]",
		"                Action: [lambda:InvokeFunction]\n                Resource: [\"*\"]", "TriggerSchedulerRole: lambda:InvokeFunction on *"},
	{"scheduler role trusted by EventBridge rules", "n_trigger_schedules",
		"              Service: scheduler.amazonaws.com", "              Service: events.amazonaws.com", "want scheduler.amazonaws.com alone"},
	{"scheduler role for any account", "n_trigger_schedules",
		"                aws:SourceAccount: !Ref AWS::AccountId\n", "", "aws:SourceAccount"},
	{"scheduler role may not dead-letter", "n_trigger_schedules",
		"              - Sid: DeadLetters\n                Effect: Allow\n                Action: [sqs:SendMessage]\n                Resource: [!GetAtt TriggerFireDeadLetterQueue.Arn]\n",
		"", "TriggerSchedulerRole: lacks sqs:SendMessage"},
	{"schedules managed outside the group", "n_trigger_schedules",
		"              Action: [scheduler:CreateSchedule, scheduler:UpdateSchedule, scheduler:DeleteSchedule]\n              Resource: [!Sub \"arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${TriggerScheduleGroup}/*\"]",
		"              Action: [scheduler:CreateSchedule, scheduler:UpdateSchedule, scheduler:DeleteSchedule]\n              Resource: [\"*\"]",
		"TriggersFunction: scheduler actions on [*]"},
	{"workflows may create schedules", "n_trigger_schedules",
		"              Action: [scheduler:DeleteSchedule]", "              Action: [scheduler:DeleteSchedule, scheduler:CreateSchedule]",
		"WorkflowsFunction: scheduler actions [scheduler:CreateSchedule scheduler:DeleteSchedule], want [scheduler:DeleteSchedule]"},
	{"role passed to any service", "n_trigger_schedules",
		"              Condition:\n                StringEquals:\n                  iam:PassedToService: scheduler.amazonaws.com\n", "",
		"conditioned on iam:PassedToService"},
	{"fire function reachable over HTTP", "n_trigger_schedules",
		"      Description: Fires schedule triggers (invoked by EventBridge Scheduler only)\n",
		"      Description: Fires schedule triggers (invoked by EventBridge Scheduler only)\n      FunctionUrlConfig:\n        AuthType: NONE\n",
		"TriggerFireFunction: has events or a function URL"},
	{"schedules target another function", "n_trigger_schedules",
		"          SCHEDULE_TARGET_ARN: !GetAtt TriggerFireFunction.Arn", "          SCHEDULE_TARGET_ARN: !GetAtt RunnerFunction.Arn",
		"SCHEDULE_TARGET_ARN"},
	{"signing key echoed", "n_trigger_schedules",
		"    NoEcho: true\n    MinLength: 32\n", "    NoEcho: false\n    MinLength: 32\n", "Parameters.WebhookSigningKey"},
	{"workflow delete leaves schedules", "n_trigger_schedules",
		"          # Deleting a workflow deletes its triggers' schedules.\n          SCHEDULE_GROUP: !Ref TriggerScheduleGroup\n", "",
		"WorkflowsFunction: SCHEDULE_GROUP"},
	{"webhook route missing", "b_routes_match_routers",
		"            Path: /hooks/{triggerId}\n", "            Path: /hooks/{id}\n",
		"TriggersFunction: route POST /hooks/{triggerId} is registered by its router but has no HttpApi event"},
	{"trigger listing without BatchGetItem", "d_iam_reviewed_contract",
		"                - dynamodb:BatchGetItem\n                - dynamodb:PutItem\n                - dynamodb:UpdateItem\n                - dynamodb:DeleteItem\n                - dynamodb:ConditionCheckItem\n                - dynamodb:Query\n              Resource: [!GetAtt DataTable.Arn]\n            # The chat of an attachment",
		"                - dynamodb:PutItem\n                - dynamodb:UpdateItem\n                - dynamodb:DeleteItem\n                - dynamodb:ConditionCheckItem\n                - dynamodb:Query\n              Resource: [!GetAtt DataTable.Arn]\n            # The chat of an attachment",
		"TriggersFunction on DataTable"},
}
