package template_test

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/workflowchat/service/functions/assembly/sweeperfn"
)

// alarmTopicParam is the parameter every alarm notifies, when set.
const alarmTopicParam = "AlarmTopicArn"

// alarmMetric is one metric an alarm reads: directly, or as a MetricStat
// of a metric-math alarm.
type alarmMetric struct {
	namespace, name string
	dims            map[string]string
}

func (m alarmMetric) String() string {
	return fmt.Sprintf("%s/%s %v", m.namespace, m.name, m.dims)
}

// alarm is an AWS::CloudWatch::Alarm of the template.
type alarm struct {
	id      string
	props   map[string]any // conditions evaluated
	tree    map[string]any // Fn::If kept
	metrics []alarmMetric
}

func (a alarm) reads(namespace, name string, dims map[string]string) bool {
	return slices.ContainsFunc(a.metrics, func(m alarmMetric) bool {
		return m.namespace == namespace && m.name == name && maps.Equal(m.dims, dims)
	})
}

func dimensions(v any) map[string]string {
	out := map[string]string{}
	list, _ := v.([]any)
	for _, d := range list {
		out[fmt.Sprint(asMap(d)["Name"])] = fmt.Sprint(asMap(d)["Value"])
	}
	return out
}

// alarms returns the template's alarms by id.
func alarms(s *stack) map[string]alarm {
	out := map[string]alarm{}
	treeRes := asMap(s.tree["Resources"])
	for id, r := range s.resources() {
		if r["Type"] != "AWS::CloudWatch::Alarm" {
			continue
		}
		a := alarm{id: id, props: asMap(r["Properties"]), tree: asMap(asMap(treeRes[id])["Properties"])}
		if ns, ok := a.props["Namespace"].(string); ok {
			a.metrics = append(a.metrics, alarmMetric{ns, fmt.Sprint(a.props["MetricName"]), dimensions(a.props["Dimensions"])})
		}
		list, _ := a.props["Metrics"].([]any)
		for _, q := range list {
			m := asMap(asMap(asMap(q)["MetricStat"])["Metric"])
			if m != nil {
				a.metrics = append(a.metrics, alarmMetric{fmt.Sprint(m["Namespace"]), fmt.Sprint(m["MetricName"]), dimensions(m["Dimensions"])})
			}
		}
		out[id] = a
	}
	return out
}

// dlqOwners name the functions whose OnFailure queue is a dead-letter
// queue, as the alarm checks' messages do.
var dlqOwners = map[string]string{runnerID: "the runner's", fireID: "the trigger fires'"}

// (n) Alarms. The parameter AlarmTopicArn (empty by default: alarms
// without actions) with the condition HasAlarmTopic; every alarm notifies
// the topic on ALARM and OK through Fn::If [HasAlarmTopic, [!Ref
// AlarmTopicArn], !Ref AWS::NoValue] and treats missing data as not
// breaching. There are alarms on: the depth of every dead-letter queue
// (each SQS queue, each function's OnFailure destination; above 0); the 5xx rate of each HTTP API (its 5xx and Count
// metrics) and of each function URL (Url5xxCount and UrlRequestCount);
// Throttles and Errors of every function; and the interrupted jobs the
// sweeper publishes (sweeperfn's metric, per hour).
func checkAlarms(s *stack, _ *codeFacts) []string {
	var probs []string
	params := asMap(s.raw["Parameters"])
	if p := asMap(params[alarmTopicParam]); p == nil || p["Default"] != "" {
		probs = append(probs, fmt.Sprintf("parameter %s: %v, want a String with Default \"\"", alarmTopicParam, p))
	}
	cond := asMap(asMap(s.tree["Conditions"])["HasAlarmTopic"])
	wantCond := map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{refMark + alarmTopicParam, ""}}}}
	if !reflect.DeepEqual(cond, wantCond) {
		probs = append(probs, fmt.Sprintf("condition HasAlarmTopic %v, want !Not [!Equals [!Ref %s, \"\"]]", cond, alarmTopicParam))
	}

	all := alarms(s)
	wantActions := map[string]any{"Fn::If": []any{"HasAlarmTopic", []any{refMark + alarmTopicParam}, refMark + "AWS::NoValue"}}
	for _, id := range sortedKeys(all) {
		a := all[id]
		for _, k := range []string{"AlarmActions", "OKActions"} {
			if !reflect.DeepEqual(a.tree[k], wantActions) {
				probs = append(probs, fmt.Sprintf("%s: %s %v, want !If [HasAlarmTopic, [!Ref %s], !Ref AWS::NoValue]", id, k, a.tree[k], alarmTopicParam))
			}
		}
		if a.props["TreatMissingData"] != "notBreaching" {
			probs = append(probs, fmt.Sprintf("%s: TreatMissingData %v, want notBreaching (no traffic is no alarm)", id, a.props["TreatMissingData"]))
		}
		if len(a.metrics) == 0 {
			probs = append(probs, id+": reads no metric")
		}
	}
	find := func(pred func(alarm) bool) (alarm, bool) {
		for _, id := range sortedKeys(all) {
			if pred(all[id]) {
				return all[id], true
			}
		}
		return alarm{}, false
	}

	// Every dead-letter queue: each SQS queue of the template (they are
	// all dead-letter queues) and each function's OnFailure destination
	// (the runner's, the trigger fires').
	queues := map[string]string{} // queue -> what it is
	for _, id := range sortedKeys(s.resources()) {
		if s.resourceType(id) == "AWS::SQS::Queue" {
			queues[id] = "a queue"
		}
	}
	for _, id := range sortedKeys(s.functions) {
		dest, _ := asMap(asMap(asMap(asMap(s.resources()[id]["Properties"])["EventInvokeConfig"])["DestinationConfig"])["OnFailure"])["Destination"].(string)
		if queue, ok := strings.CutSuffix(strings.TrimPrefix(dest, getAttMark), ".Arn"); ok && dest != "" {
			queues[queue] = dlqOwners[id] + " dead-letter queue"
			if dlqOwners[id] == "" {
				queues[queue] = id + "'s dead-letter queue"
			}
		}
	}
	for _, queue := range sortedKeys(queues) {
		dlq, ok := find(func(a alarm) bool {
			return a.reads("AWS/SQS", "ApproximateNumberOfMessagesVisible", map[string]string{"QueueName": getAttMark + queue + ".QueueName"})
		})
		switch {
		case !ok:
			probs = append(probs, fmt.Sprintf("%s (%s): no alarm on its ApproximateNumberOfMessagesVisible", queue, queues[queue]))
		case dlq.props["Threshold"] != 0.0 || dlq.props["ComparisonOperator"] != "GreaterThanThreshold":
			probs = append(probs, fmt.Sprintf("%s: threshold %v %v, want GreaterThanThreshold 0 (any message in the dead-letter queue)", dlq.id, dlq.props["ComparisonOperator"], dlq.props["Threshold"]))
		}
	}

	// The 5xx rate of each HTTP API and each function URL.
	for id, r := range s.resources() {
		if r["Type"] != "AWS::Serverless::HttpApi" {
			continue
		}
		dims := map[string]string{"ApiId": refMark + id}
		if _, ok := find(func(a alarm) bool {
			return a.reads("AWS/ApiGateway", "5xx", dims) && a.reads("AWS/ApiGateway", "Count", dims)
		}); !ok {
			probs = append(probs, id+": no 5xx-rate alarm (AWS/ApiGateway 5xx over Count, ApiId = !Ref "+id+")")
		}
	}
	for _, id := range sortedKeys(s.functions) {
		dims := map[string]string{"FunctionName": refMark + id}
		if s.functions[id].FunctionUrlConfig != nil {
			if _, ok := find(func(a alarm) bool {
				return a.reads("AWS/Lambda", "Url5xxCount", dims) && a.reads("AWS/Lambda", "UrlRequestCount", dims)
			}); !ok {
				probs = append(probs, id+": no 5xx-rate alarm on its function URL (AWS/Lambda Url5xxCount over UrlRequestCount)")
			}
		}
		for _, metric := range []string{"Throttles", "Errors"} {
			if _, ok := find(func(a alarm) bool { return a.reads("AWS/Lambda", metric, dims) }); !ok {
				probs = append(probs, fmt.Sprintf("%s: no %s alarm (AWS/Lambda %s, FunctionName = !Ref %s)", id, metric, metric, id))
			}
		}
	}

	// Interrupted jobs per hour, as the sweeper's handler publishes them
	// in its info line.
	if fn, ok := s.functions[sweeperID]; ok {
		if lvl := s.env(fn)["LOG_LEVEL"]; lvl != "info" && lvl != "debug" {
			probs = append(probs, fmt.Sprintf("%s: LOG_LEVEL %q, want info (or debug): its info line carries the interrupted jobs", sweeperID, lvl))
		}
	}
	interrupted, ok := find(func(a alarm) bool {
		return a.reads(sweeperfn.MetricNamespace, sweeperfn.InterruptedJobsMetric, map[string]string{"FunctionName": refMark + sweeperID})
	})
	switch {
	case !ok:
		probs = append(probs, fmt.Sprintf("no alarm on the interrupted jobs (%s/%s, FunctionName = !Ref %s, as sweeperfn publishes them)",
			sweeperfn.MetricNamespace, sweeperfn.InterruptedJobsMetric, sweeperID))
	case interrupted.props["Period"] != 3600.0 || interrupted.props["Statistic"] != "Sum":
		probs = append(probs, fmt.Sprintf("%s: %v of %v s, want the Sum per hour (Period 3600)", interrupted.id, interrupted.props["Statistic"], interrupted.props["Period"]))
	}
	return probs
}

// dlqAlarmCases break the dead-letter queues' alarms.
var dlqAlarmCases = []brokenCase{
	{"the trigger fires' dead-letter queue without its alarm", "n_alarms",
		"          Value: !GetAtt TriggerFireDeadLetterQueue.QueueName\n", "          Value: !GetAtt RunnerDeadLetterQueue.QueueName\n",
		"TriggerFireDeadLetterQueue (the trigger fires' dead-letter queue): no alarm"},
	{"the trigger fires' dead-letter alarm tolerates messages", "n_alarms",
		"          Value: !GetAtt TriggerFireDeadLetterQueue.QueueName\n      Statistic: Maximum\n      Period: 300\n      EvaluationPeriods: 1\n      Threshold: 0\n",
		"          Value: !GetAtt TriggerFireDeadLetterQueue.QueueName\n      Statistic: Maximum\n      Period: 300\n      EvaluationPeriods: 1\n      Threshold: 5\n",
		"TriggerFireDeadLetterAlarm: threshold GreaterThanThreshold 5"},
}

// TestDeadLetterAlarmCases requires checkAlarms to report each of
// dlqAlarmCases.
func TestDeadLetterAlarmCases(t *testing.T) {
	t.Parallel()
	runBrokenCases(t, dlqAlarmCases, nil)
}

// runBrokenCases breaks template.yaml in memory once per case and
// requires the named check (of checks, or of extra) to report it,
// as TestChecksCatchBrokenTemplates does.
func runBrokenCases(t *testing.T, cases []brokenCase, extra map[string]check) {
	t.Helper()
	src := string(loadTemplate(t))
	f := loadFacts(t)
	byName := maps.Clone(extra)
	if byName == nil {
		byName = map[string]check{}
	}
	for _, c := range checks {
		byName[c.name] = c.fn
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn, ok := byName[tc.check]
			if !ok {
				t.Fatalf("no check %q", tc.check)
			}
			if !strings.Contains(src, tc.old) {
				t.Fatalf("template.yaml no longer contains %q: update this case", tc.old)
			}
			s, err := parse([]byte(strings.Replace(src, tc.old, tc.new, 1)))
			if err != nil {
				t.Fatalf("parse broken template: %v", err)
			}
			probs := fn(s, f)
			for _, p := range probs {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("check %s did not report %q; it reported %q", tc.check, tc.want, probs)
		})
	}
}
