package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/workflowchat/service/infra/cost/costmodel"
	"github.com/workflowchat/service/infra/cost/measure"
)

func TestPerMonth(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		schedule string
		want     float64
		ok       bool
	}{
		{"rate(1 minute)", 43800, true},
		{"rate(5 minutes)", 8760, true},
		{"rate(2 hours)", 365, true},
		{"rate(1 day)", 730.0 / 24, true},
		{"rate(0 minutes)", 0, false},
		{"cron(0 * * * ? *)", 0, false},
		{"", 0, false},
	} {
		got, err := perMonth(c.schedule)
		if (err == nil) != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("perMonth(%q) = %v, %v; want %v (ok %v)", c.schedule, got, err, c.want, c.ok)
		}
	}
}

// TestReadTemplate: what an idle month pays for, read from template.yaml:
// the sweeper every minute, the alarms (a metric math alarm counts each
// metric it reads), the signing key's secret, and every function's
// memory as costmodel.Memory says.
func TestReadTemplate(t *testing.T) {
	t.Parallel()
	f, err := readTemplate("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if f.schedule != "rate(1 minute)" || f.sweepsPerMonth != 43800 {
		t.Errorf("sweeper: %q, %v a month", f.schedule, f.sweepsPerMonth)
	}
	if f.alarms == 0 || f.alarmMetrics <= f.alarms || f.secrets != 1 {
		t.Errorf("alarms %d on %d metrics, %d secrets", f.alarms, f.alarmMetrics, f.secrets)
	}
	for _, m := range costmodel.Memory {
		if f.memory[m.Function] != m.MB {
			t.Errorf("%s: %d MB in template.yaml, %d in costmodel.Memory", m.Function, f.memory[m.Function], m.MB)
		}
	}
	if len(f.memory) != len(costmodel.Memory) {
		t.Errorf("%d functions in template.yaml, %d in costmodel.Memory", len(f.memory), len(costmodel.Memory))
	}
	if alarmMetrics(map[string]any{"MetricName": "Errors"}) != 1 ||
		alarmMetrics(map[string]any{"Metrics": []any{map[string]any{"Expression": "a/b"}, map[string]any{"MetricStat": 1}, map[string]any{"MetricStat": 2}}}) != 2 {
		t.Error("alarmMetrics miscounts")
	}
}

// TestReportOfTinyWorkload runs the cost model on a tiny fixed workload:
// the DynamoDB capacity of measure.Tiny measured now, in process, and the
// emulator's measurement of the same workload kept in testdata
// (LAMBDART_COST_WORKLOAD=tiny). It checks the printed report: every line
// present, every figure positive, each per-1,000 figure 1,000 times one
// unit's inputs times the prices (recomputed here, per service, from the
// report's inputs), the idle month likewise, the breakdowns adding up,
// the prices with their date and sources, the inputs of each unit and the
// memory of each function.
func TestReportOfTinyWorkload(t *testing.T) {
	t.Parallel()
	capacity, err := measure.MeasureCapacity(context.Background(), measure.Tiny)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/emulated_tiny.json")
	if err != nil {
		t.Fatal(err)
	}
	var emulated measure.Emulated
	if err := json.Unmarshal(raw, &emulated); err != nil {
		t.Fatal(err)
	}
	facts, err := readTemplate("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	index, err := measure.MeasureIndex(context.Background(), measure.Tiny)
	if err != nil {
		t.Fatal(err)
	}
	r, err := buildReport(measure.Tiny, capacity, index, emulated, facts)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	p := r.Prices

	// The lines, each with its figure and breakdown.
	line := func(label string) (float64, map[string]float64) {
		t.Helper()
		re := regexp.MustCompile(`(?m)^\$(\d+\.\d{4}) ` + regexp.QuoteMeta(label) + `[^\n]*\): ([^\n]*)$`)
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no line %q in the report", label)
		}
		total, _ := strconv.ParseFloat(m[1], 64)
		parts := map[string]float64{}
		for _, part := range strings.Split(m[2], ", ") {
			name, v, ok := strings.Cut(part, " $")
			f, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				t.Fatalf("line %q: breakdown %q", label, part)
			}
			parts[name] = f
		}
		return total, parts
	}
	// One unit's cost, from its inputs and the prices, per service.
	unitCost := func(u costmodel.Usage) map[string]float64 {
		c := map[string]float64{}
		for _, i := range u.Lambda {
			if i.MemoryMB <= 0 || i.Seconds <= 0 || i.Count <= 0 {
				t.Errorf("%s: %+v", i.Function, i)
			}
			c["Lambda"] += i.Count*p.LambdaRequest + i.Seconds*float64(i.MemoryMB)/1024*p.LambdaGBSecond
		}
		c["DynamoDB"] = u.DynamoDB.ReadUnits*p.DynamoDBReadUnit + (u.DynamoDB.WriteUnits+u.DynamoDB.FailedWrites)*p.DynamoDBWriteUnit
		c["API Gateway"] = u.HTTPAPI.Count * p.HTTPAPIRequest
		c["CloudFront"] = u.CloudFront.Requests*(p.CloudFrontRequest+p.CloudFrontFunction) +
			u.CloudFront.BytesIn/(1<<30)*p.CloudFrontToOriginGB + u.CloudFront.BytesOut/(1<<30)*p.CloudFrontOutGB
		c["S3"] = u.S3.Puts*p.S3PutRequest + u.S3.Gets*p.S3GetRequest
		c["CloudWatch Logs"] = u.LogBytes / (1 << 30) * p.LogsIngestGB
		return c
	}
	const rounding = 0.00005 // the report prints four decimals
	check := func(label string, want map[string]float64) float64 {
		t.Helper()
		total, parts := line(label)
		sum, wantTotal := 0.0, 0.0
		for name, v := range want {
			wantTotal += v
			if got, ok := parts[name]; (ok || v >= rounding) && math.Abs(got-v) > rounding {
				t.Errorf("%s: %s $%.4f, recomputed $%.6f", label, name, got, v)
			}
		}
		for _, v := range parts {
			sum += v
		}
		if total <= 0 || math.Abs(total-wantTotal) > rounding {
			t.Errorf("%s: $%.4f, recomputed $%.6f", label, total, wantTotal)
		}
		if math.Abs(sum-total) > rounding*float64(len(parts)+1) {
			t.Errorf("%s: the breakdown adds up to $%.4f, not $%.4f", label, sum, total)
		}
		return total
	}
	scale := func(c map[string]float64, f float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range c {
			out[k] = v * f
		}
		return out
	}
	if len(r.Work) != 3 {
		t.Fatalf("%d kinds of work, want short and long replies and workflow steps", len(r.Work))
	}
	short := check(fmt.Sprintf("per 1,000 replies, %s write units per reply (short reply", trimUnits(r.Work[0].Usage.DynamoDB.WriteUnits)), scale(unitCost(r.Work[0].Usage), 1000))
	long := check(fmt.Sprintf("per 1,000 replies, %s write units per reply (long reply", trimUnits(r.Work[1].Usage.DynamoDB.WriteUnits)), scale(unitCost(r.Work[1].Usage), 1000))
	check("per 1,000 workflow steps", scale(unitCost(r.Work[2].Usage), 1000/float64(measure.Tiny.Steps)))
	idle := scale(unitCost(r.Idle.Sweep), r.Idle.SweepsPerMonth)
	idle["alarms"] = float64(facts.alarmMetrics) * p.AlarmMetricMonth
	idle["Secrets Manager"] = float64(facts.secrets) * p.SecretMonth
	check("per idle month", idle)
	// A schedule's month: every fire's usage (TriggerFireFunction, the run
	// it starts) plus its Scheduler invocation, 43,800 times.
	if r.Schedule.FiresPerMonth != 43800 || r.Schedule.Samples != measure.Tiny.Samples.Fires {
		t.Errorf("schedule: %v fires a month, %d measured", r.Schedule.FiresPerMonth, r.Schedule.Samples)
	}
	fire := unitCost(r.Schedule.Fire)
	fire["EventBridge Scheduler"] = p.SchedulerInvocation
	check("per schedule per month", scale(fire, r.Schedule.FiresPerMonth))
	if long <= short {
		t.Errorf("a long reply ($%.4f per 1,000) costs no more than a short one ($%.4f)", long, short)
	}
	// The search index's writes per message, DynamoDB only: the longer
	// reply has more distinct words, so more postings.
	if len(r.Index) != 2 {
		t.Fatalf("%d kinds of index work, want the short and the long exchange's", len(r.Index))
	}
	var perMessage [2]float64
	for i, wk := range r.Index {
		if len(wk.Usage.Lambda) != 0 || wk.Usage.DynamoDB.WriteUnits < 3 || wk.Samples != 2*[]int{measure.Tiny.Samples.Short, measure.Tiny.Samples.Long}[i] {
			t.Errorf("%s: %+v", wk.Name, wk)
		}
		perMessage[i] = check(fmt.Sprintf("per 1,000 messages indexed, %s write units per message (%s", trimUnits(wk.Usage.DynamoDB.WriteUnits), wk.Name), scale(unitCost(wk.Usage), 1000))
	}
	if perMessage[1] <= perMessage[0] {
		t.Errorf("indexing a long exchange's message ($%.4f per 1,000) costs no more than a short one's ($%.4f)", perMessage[1], perMessage[0])
	}

	// The prices, dated, with their sources; the inputs; the memory.
	for _, want := range []string{"Prices, us-east-1, as of " + p.AsOf, "$0.0000133334 per GB-second", "$0.125 per million read request units",
		"$0.625 per million write request units", "$1.00 per million requests", "Inputs, measured, per unit of work:",
		"short reply (8 tokens streamed", "per run of 2 steps:", "idle sweep (one scheduled invocation over empty tables), per sweep:",
		"Lambda StreamFunction: 1 invocation(s)", "Lambda RunnerFunction: 1 invocation(s)", "Lambda SweeperFunction: 1 invocation(s)",
		"Lambda TriggerFireFunction: 1 invocation(s)", "$1.00 per million invocations", "schedule fire (",
		"of it waiting on the model", "Memory: each function's MemorySize against its measured peak", "Assumptions:"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, s := range costmodel.Sources {
		if !strings.Contains(out, s.URL) {
			t.Errorf("the report lacks the source %s", s.URL)
		}
	}
	for _, m := range costmodel.Memory {
		if !regexp.MustCompile(`(?m)^  ` + m.Function + ` +` + strconv.Itoa(m.MB) + ` MB  peak +\d+\.\d MiB`).MatchString(out) {
			t.Errorf("the memory section lacks %s's measured peak", m.Function)
		}
	}
}

// trimUnits formats write units as the report does: up to three
// decimals, no trailing zeros.
func trimUnits(x float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", x), "0"), ".")
}
