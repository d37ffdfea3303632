package template_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// logRetentionParam is the parameter every function's log group is kept
// for, in days.
const logRetentionParam = "LogRetentionDays"

// logRetentionDays are the values CloudWatch Logs allows for
// RetentionInDays: all bounded (none is "never expire").
var logRetentionDays = []float64{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}

// (u) Log retention: every function's log group is an AWS::Logs::LogGroup
// of the template named as Lambda names it, /aws/lambda/<function name>
// (!Sub "/aws/lambda/${<Function>}", or its FunctionName), and kept a
// bounded time: RetentionInDays a value CloudWatch allows, or !Ref
// LogRetentionDays, a Number whose default and every allowed value are
// such values. No function names its own role (SAM's, with the basic
// execution policy, is what writes to the group), and none logs elsewhere
// (LoggingConfig.LogGroup).
func checkLogRetention(s *stack, _ *codeFacts) []string {
	var probs []string
	bounded := func(v any) bool {
		f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
		return err == nil && slices.Contains(logRetentionDays, f)
	}
	param := asMap(asMap(s.raw["Parameters"])[logRetentionParam])
	allowed, _ := param["AllowedValues"].([]any)
	switch {
	case param == nil:
		probs = append(probs, "parameter "+logRetentionParam+": missing")
	case param["Type"] != "Number" || !bounded(param["Default"]) || len(allowed) == 0:
		probs = append(probs, fmt.Sprintf("parameter %s: Type %v, Default %v, AllowedValues %v; want a Number defaulting to a retention CloudWatch allows, with AllowedValues", logRetentionParam, param["Type"], param["Default"], allowed))
	default:
		for _, v := range allowed {
			if !bounded(v) {
				probs = append(probs, fmt.Sprintf("parameter %s: allowed value %v is no bounded retention CloudWatch allows", logRetentionParam, v))
			}
		}
	}

	// The log groups by name, and their retention.
	groups := map[string][]string{}
	retention := map[string]any{}
	res := s.resources()
	for _, id := range sortedKeys(res) {
		if res[id]["Type"] != "AWS::Logs::LogGroup" {
			continue
		}
		props := asMap(res[id]["Properties"])
		name := fmt.Sprint(props["LogGroupName"])
		groups[name] = append(groups[name], id)
		retention[id] = props["RetentionInDays"]
	}
	for _, id := range sortedKeys(s.functions) {
		props := asMap(res[id]["Properties"])
		if _, ok := props["Role"]; ok {
			probs = append(probs, id+": Role set; the role SAM makes has the basic execution policy that writes the function's logs")
		}
		if lg, ok := asMap(props["LoggingConfig"])["LogGroup"]; ok {
			probs = append(probs, fmt.Sprintf("%s: LoggingConfig.LogGroup %v; the function logs to /aws/lambda/<its name>", id, lg))
		}
		names := []string{subMark + "/aws/lambda/${" + id + "}"}
		if n, ok := props["FunctionName"].(string); ok {
			// A plain name, or a !Sub ("${AWS::StackName}-runner").
			names = append(names, subMark+"/aws/lambda/"+strings.TrimPrefix(n, subMark))
		}
		var found []string
		for _, n := range names {
			found = append(found, groups[n]...)
		}
		switch {
		case len(found) == 0:
			probs = append(probs, fmt.Sprintf("%s: no AWS::Logs::LogGroup named !Sub \"/aws/lambda/${%s}\": Lambda would make its own, kept forever", id, id))
			continue
		case len(found) > 1:
			probs = append(probs, fmt.Sprintf("%s: log groups %v, want one", id, found))
		}
		r := retention[found[0]]
		if r != refMark+logRetentionParam && !bounded(r) {
			probs = append(probs, fmt.Sprintf("%s: RetentionInDays %v, want !Ref %s (or a bounded value CloudWatch allows)", found[0], r, logRetentionParam))
		}
	}
	return probs
}

// TestLogRetention holds the template to checkLogRetention, and requires
// the check to catch logRetentionCases.
func TestLogRetention(t *testing.T) {
	t.Parallel()
	s, err := parse(loadTemplate(t))
	if err != nil {
		t.Fatalf("parse template.yaml: %v", err)
	}
	f := loadFacts(t)
	for _, p := range checkLogRetention(s, f) {
		t.Error(p)
	}
	t.Run("catches", func(t *testing.T) {
		t.Parallel()
		runBrokenCases(t, logRetentionCases, map[string]check{"u_log_retention": checkLogRetention})
	})
}

// logRetentionCases break the log groups.
var logRetentionCases = []brokenCase{
	{"a function without its log group", "u_log_retention",
		"  ChatsFunctionLogGroup:\n    Type: AWS::Logs::LogGroup\n    Properties:\n      LogGroupName: !Sub \"/aws/lambda/${ChatsFunction}\"\n      RetentionInDays: !Ref LogRetentionDays\n", "",
		"ChatsFunction: no AWS::Logs::LogGroup"},
	{"a log group kept forever", "u_log_retention",
		"      LogGroupName: !Sub \"/aws/lambda/${RunnerFunction}\"\n      RetentionInDays: !Ref LogRetentionDays\n", "      LogGroupName: !Sub \"/aws/lambda/${RunnerFunction}\"\n",
		"RunnerFunctionLogGroup: RetentionInDays <nil>"},
	{"a log group named after another function", "u_log_retention",
		"      LogGroupName: !Sub \"/aws/lambda/${SweeperFunction}\"", "      LogGroupName: !Sub \"/aws/lambda/${RunnerFunction}\"",
		"SweeperFunction: no AWS::Logs::LogGroup"},
	{"a retention CloudWatch does not allow", "u_log_retention",
		"      RetentionInDays: !Ref LogRetentionDays\n", "      RetentionInDays: 31\n",
		"RetentionInDays 31"},
	{"the parameter allows any number", "u_log_retention",
		"    AllowedValues: [\"1\", \"3\", \"5\", \"7\", \"14\", \"30\", \"60\", \"90\", \"120\", \"150\", \"180\", \"365\", \"400\", \"545\", \"731\", \"1096\", \"1827\", \"2192\", \"2557\", \"2922\", \"3288\", \"3653\"]\n", "",
		"parameter LogRetentionDays"},
}
