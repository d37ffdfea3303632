// Package costmodel is the service's cost model: what a reply, a workflow
// step and an idle month cost in AWS, from what they were measured to use
// (Usage: Lambda invocations and their billed duration at each function's
// configured memory, DynamoDB read and write request units, API Gateway
// and CloudFront requests and bytes, S3 requests, log bytes) at dated
// list prices (USEast1). It measures nothing itself: infra/cost/measure
// and the emulator's test (infra/lambdart) do, and `make cost` (infra/cost)
// puts them together and prints Report. It also keeps, in one place, each
// function's MemorySize and the rule that sizes it from its measured peak
// (Memory), which template.yaml's tests check.
package costmodel

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Usage is what one unit of work used: the model's inputs, each measured.
type Usage struct {
	// Lambda are the invocations, one entry per function.
	Lambda []Invocations
	// DynamoDB are the capacity units the calls consumed, as DynamoDB
	// reported them (store.CapacityMeter), and the calls that failed.
	DynamoDB DynamoDB
	// HTTPAPI are the requests that went through the HTTP API, as API
	// Gateway meters them (a request per 512 KB of request and response),
	// and their bytes.
	HTTPAPI Requests
	// CloudFront are the client's requests, all of which the distribution
	// serves (the HTTP API's, the stream's and the MCP gateway's):
	// requests, bytes to the origin (request bodies) and to the internet
	// (responses, headers included).
	CloudFront Edge
	// S3 are the blob store's requests, by price class.
	S3 S3
	// LogBytes are the bytes the functions wrote to CloudWatch Logs: their
	// own lines and Lambda's START, END and REPORT lines.
	LogBytes float64
}

// Invocations are the invocations of one function in a unit of work.
type Invocations struct {
	// Function is the function's logical id in template.yaml.
	Function string
	// Count is the number of invocations.
	Count float64
	// Seconds is their billed duration, each invocation's rounded up to
	// the millisecond, and ModelSeconds the part of it spent waiting on a
	// model (reported, priced the same).
	Seconds, ModelSeconds float64
	// MemoryMB is the function's MemorySize.
	MemoryMB int
}

// GBSeconds is the compute the invocations are billed.
func (i Invocations) GBSeconds() float64 { return i.Seconds * float64(i.MemoryMB) / 1024 }

// DynamoDB is what the DynamoDB calls of a unit of work consumed.
type DynamoDB struct {
	ReadUnits, WriteUnits float64
	// Calls are the successful calls; FailedWrites the failed writes
	// (a failed condition), each priced as one write unit, the least a
	// write consumes (DynamoDB reports no capacity with an error).
	Calls, FailedReads, FailedWrites float64
	// ByCall splits the figures by kind of call (store.CallKind: the
	// operation and the kinds of item it touches), largest write units
	// first; empty when not measured.
	ByCall []Call
}

// Call is one kind of DynamoDB call's share of a unit of work: how many
// such calls a unit makes and the units they consume together.
type Call struct {
	Kind                         string
	Calls, ReadUnits, WriteUnits float64
}

// Requests are metered requests and their bytes.
type Requests struct{ Count, Bytes float64 }

// Edge is CloudFront's share of a unit of work.
type Edge struct{ Requests, BytesIn, BytesOut float64 }

// S3 are S3 requests by price class.
type S3 struct{ Puts, Gets float64 }

// Cost is a figure in dollars by service.
type Cost struct {
	Lambda, DynamoDB, APIGateway, CloudFront, S3, Logs, Alarms, Secrets, Storage, Scheduler float64
}

// Total is the sum of c's services.
func (c Cost) Total() float64 {
	return c.Lambda + c.DynamoDB + c.APIGateway + c.CloudFront + c.S3 + c.Logs + c.Alarms + c.Secrets + c.Storage + c.Scheduler
}

// Scale is c times f.
func (c Cost) Scale(f float64) Cost {
	return Cost{c.Lambda * f, c.DynamoDB * f, c.APIGateway * f, c.CloudFront * f, c.S3 * f, c.Logs * f, c.Alarms * f, c.Secrets * f, c.Storage * f, c.Scheduler * f}
}

// Add is c plus d.
func (c Cost) Add(d Cost) Cost {
	return Cost{c.Lambda + d.Lambda, c.DynamoDB + d.DynamoDB, c.APIGateway + d.APIGateway, c.CloudFront + d.CloudFront, c.S3 + d.S3,
		c.Logs + d.Logs, c.Alarms + d.Alarms, c.Secrets + d.Secrets, c.Storage + d.Storage, c.Scheduler + d.Scheduler}
}

const gb = 1 << 30

// Cost prices u at p.
func (u Usage) Cost(p Prices) Cost {
	var c Cost
	for _, inv := range u.Lambda {
		c.Lambda += inv.Count*p.LambdaRequest + inv.GBSeconds()*p.LambdaGBSecond
	}
	c.DynamoDB = u.DynamoDB.ReadUnits*p.DynamoDBReadUnit + (u.DynamoDB.WriteUnits+u.DynamoDB.FailedWrites)*p.DynamoDBWriteUnit
	c.APIGateway = u.HTTPAPI.Count * p.HTTPAPIRequest
	c.CloudFront = u.CloudFront.Requests*(p.CloudFrontRequest+p.CloudFrontFunction) +
		u.CloudFront.BytesIn/gb*p.CloudFrontToOriginGB + u.CloudFront.BytesOut/gb*p.CloudFrontOutGB
	c.S3 = u.S3.Puts*p.S3PutRequest + u.S3.Gets*p.S3GetRequest
	c.Logs = u.LogBytes / gb * p.LogsIngestGB
	return c
}

// Work is one kind of work the model prices, per 1,000 items: what one
// unit of it used (averaged over the units measured).
type Work struct {
	// Name names the work in the report ("short reply").
	Name string
	// Per is what the report's line counts ("replies", "workflow steps"),
	// and Items how many of them one unit holds (a run of 5 steps is 5
	// workflow steps).
	Per   string
	Items float64
	// Unit names one unit in the inputs ("reply", "run of 5 steps").
	Unit string
	// Detail says how a unit was made ("150 tokens at 60 tokens/s").
	Detail string
	// Samples is the number of units measured.
	Samples int
	// Usage is one unit's.
	Usage Usage
}

// PerThousand is the cost of 1,000 of w's items at p.
func (w Work) PerThousand(p Prices) Cost { return w.Usage.Cost(p).Scale(1000 / w.Items) }

// Idle is what the service costs with nobody using it, for a month.
type Idle struct {
	// Schedule is the sweeper's schedule expression in template.yaml and
	// SweepsPerMonth its invocations in a month of HoursPerMonth.
	Schedule       string
	SweepsPerMonth float64
	// Sweep is one sweep over empty tables, measured.
	Sweep Usage
	// Alarms are template.yaml's CloudWatch alarms and AlarmMetrics the
	// metrics they evaluate (a metric math alarm is billed per metric).
	Alarms, AlarmMetrics int
	// Secrets are template.yaml's Secrets Manager secrets.
	Secrets int
	// StorageGB is what the tables and the bucket hold: nothing in an idle
	// stack (neither has a minimum charge).
	StorageGB float64
}

// HoursPerMonth is the month the model bills: AWS's 730 hours.
const HoursPerMonth = 730

// Cost prices a month of i at p.
func (i Idle) Cost(p Prices) Cost {
	c := i.Sweep.Cost(p).Scale(i.SweepsPerMonth)
	c.Alarms = float64(i.AlarmMetrics) * p.AlarmMetricMonth
	c.Secrets = float64(i.Secrets) * p.SecretMonth
	c.Storage = i.StorageGB * (p.DynamoDBStorageGBMonth + p.S3StorageGBMonth)
	return c
}

// Schedule is what one schedule trigger costs for a month: each fire is
// an EventBridge Scheduler invocation of TriggerFireFunction, which
// starts a run (RunnerFunction, the run's steps on McpFunction); Fire is
// one fire measured, its run included.
type Schedule struct {
	// Expression is the schedule ("rate(1 minute)") and FiresPerMonth
	// its fires in a month of HoursPerMonth.
	Expression    string
	FiresPerMonth float64
	// Detail says what each fire runs; Samples how many fires were
	// measured.
	Detail  string
	Samples int
	Fire    Usage
}

// Cost prices a month of s at p.
func (s Schedule) Cost(p Prices) Cost {
	c := s.Fire.Cost(p)
	c.Scheduler = p.SchedulerInvocation
	return c.Scale(s.FiresPerMonth)
}

// FunctionPeak is a function's measured peak memory.
type FunctionPeak struct {
	// Function is the function's logical id.
	Function string
	// PeakMiB is the most resident memory its process (and the processes
	// it started) held over the workload; Invocations how many
	// invocations that covered.
	PeakMiB     float64
	Invocations int
}

// Report is what make cost prints.
type Report struct {
	// Measured says when and on what machine the usage was measured.
	Measured string
	Prices   Prices
	Work     []Work
	Idle     Idle
	// Schedule is one schedule trigger's month (none when zero).
	Schedule Schedule
	// Index is the search index's share of a stored message, per kind of
	// message: work whose usage is DynamoDB's alone (none when empty).
	Index []Work
	// Peaks are the functions' measured peaks, checked against Memory.
	Peaks []FunctionPeak
	// Notes are the model's assumptions, printed at the end.
	Notes []string
}

// usd formats a dollar figure with four decimals.
func usd(x float64) string { return fmt.Sprintf("$%.4f", x) }

// Line is the report's line of w: its cost per 1,000 items, with the
// DynamoDB write units of one of its units (a reply, a run) beside it.
func (r Report) Line(w Work) string {
	c := w.PerThousand(r.Prices)
	return fmt.Sprintf("%s per 1,000 %s, %s write units per %s (%s: %s): %s", usd(c.Total()), w.Per, trim(w.Usage.DynamoDB.WriteUnits), w.Unit,
		w.Name, w.Detail, breakdown(c))
}

// IdleLine is the report's line of the idle month.
func (r Report) IdleLine() string {
	c := r.Idle.Cost(r.Prices)
	return fmt.Sprintf("%s per idle month (%d alarms on %d metrics, %d secret(s), %s sweeps on %s, nothing stored): %s",
		usd(c.Total()), r.Idle.Alarms, r.Idle.AlarmMetrics, r.Idle.Secrets, Thousands(r.Idle.SweepsPerMonth), r.Idle.Schedule, breakdown(c))
}

// ScheduleLine is the report's line of one schedule's month.
func (r Report) ScheduleLine() string {
	c := r.Schedule.Cost(r.Prices)
	return fmt.Sprintf("%s per schedule per month (%s, %s fires, each %s): %s",
		usd(c.Total()), r.Schedule.Expression, Thousands(r.Schedule.FiresPerMonth), r.Schedule.Detail, breakdown(c))
}

// breakdown lists c's non-zero services.
func breakdown(c Cost) string {
	var parts []string
	for _, s := range []struct {
		name string
		v    float64
	}{{"Lambda", c.Lambda}, {"DynamoDB", c.DynamoDB}, {"API Gateway", c.APIGateway}, {"CloudFront", c.CloudFront}, {"S3", c.S3},
		{"CloudWatch Logs", c.Logs}, {"alarms", c.Alarms}, {"Secrets Manager", c.Secrets}, {"storage", c.Storage}, {"EventBridge Scheduler", c.Scheduler}} {
		if s.v != 0 {
			parts = append(parts, s.name+" "+usd(s.v))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// Write prints r: the cost lines first, then the prices with their date
// and sources, the inputs per unit of work, the memory of each function
// against its measured peak, and the assumptions.
func (r Report) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Cost model (%s prices of %s; usage measured %s)\n\n", r.Prices.Region, r.Prices.AsOf, r.Measured)
	for _, wk := range r.Work {
		fmt.Fprintf(&b, "%s\n", r.Line(wk))
	}
	fmt.Fprintf(&b, "%s\n", r.IdleLine())
	if r.Schedule.FiresPerMonth > 0 {
		fmt.Fprintf(&b, "%s\n", r.ScheduleLine())
	}
	for _, wk := range r.Index {
		fmt.Fprintf(&b, "%s\n", r.Line(wk))
	}

	fmt.Fprintf(&b, "\nPrices, %s, as of %s (%s):\n", r.Prices.Region, r.Prices.AsOf, r.Prices.Note)
	for _, l := range r.Prices.lines() {
		fmt.Fprintf(&b, "  %-52s $%s per %s\n", l.what, price(l.usd*l.scale), l.per)
	}
	fmt.Fprintf(&b, "Sources:\n")
	for _, s := range Sources {
		fmt.Fprintf(&b, "  %-48s %s\n", s.Service, s.URL)
	}

	fmt.Fprintf(&b, "\nInputs, measured, per unit of work:\n")
	for _, wk := range r.Work {
		fmt.Fprintf(&b, "  %s (%s; %d measured), per %s:\n", wk.Name, wk.Detail, wk.Samples, wk.Unit)
		writeUsage(&b, wk.Usage)
	}
	fmt.Fprintf(&b, "  idle sweep (one scheduled invocation over empty tables), per sweep:\n")
	writeUsage(&b, r.Idle.Sweep)
	if r.Schedule.FiresPerMonth > 0 {
		fmt.Fprintf(&b, "  schedule fire (%s; %d measured), per fire:\n", r.Schedule.Detail, r.Schedule.Samples)
		writeUsage(&b, r.Schedule.Fire)
	}
	for _, wk := range r.Index {
		fmt.Fprintf(&b, "  %s (%s; %d measured), per %s:\n", wk.Name, wk.Detail, wk.Samples, wk.Unit)
		WriteDynamoDB(&b, wk.Usage.DynamoDB)
	}

	if len(r.Peaks) > 0 {
		fmt.Fprintf(&b, "\nMemory: each function's MemorySize against its measured peak (%s):\n", RuleText)
		for _, c := range CheckMemory(r.Peaks) {
			fmt.Fprintf(&b, "  %s\n", c)
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(&b, "\nAssumptions:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeUsage(b *strings.Builder, u Usage) {
	for _, inv := range u.Lambda {
		wait := ""
		if inv.ModelSeconds > 0 {
			wait = fmt.Sprintf(", %.3f s of it waiting on the model", inv.ModelSeconds)
		}
		fmt.Fprintf(b, "    Lambda %s: %s invocation(s), %.3f s billed at %d MB = %.4f GB-s%s\n",
			inv.Function, trim(inv.Count), inv.Seconds, inv.MemoryMB, inv.GBSeconds(), wait)
	}
	WriteDynamoDB(b, u.DynamoDB)
	fmt.Fprintf(b, "    API Gateway: %s metered request(s), %s; CloudFront: %s request(s), %s in, %s out\n",
		trim(u.HTTPAPI.Count), bytes(u.HTTPAPI.Bytes), trim(u.CloudFront.Requests), bytes(u.CloudFront.BytesIn), bytes(u.CloudFront.BytesOut))
	fmt.Fprintf(b, "    S3: %s PUT-class, %s GET-class requests; CloudWatch Logs: %s\n", trim(u.S3.Puts), trim(u.S3.Gets), bytes(u.LogBytes))
}

// WriteDynamoDB writes a unit of work's DynamoDB figures to b: the totals,
// then one line per kind of call (DynamoDB.ByCall).
func WriteDynamoDB(b *strings.Builder, d DynamoDB) {
	fmt.Fprintf(b, "    DynamoDB: %s read units, %s write units (%s calls; failed: %s reads, %s writes)\n",
		trim(d.ReadUnits), trim(d.WriteUnits), trim(d.Calls), trim(d.FailedReads), trim(d.FailedWrites))
	for _, c := range d.ByCall {
		per := ""
		if c.Calls > 0 && c.WriteUnits > 0 {
			per = fmt.Sprintf(" (%s per call)", trim(c.WriteUnits/c.Calls))
		}
		fmt.Fprintf(b, "      %-48s %7s calls, %8s read units, %8s write units%s\n", c.Kind+":", trim(c.Calls), trim(c.ReadUnits), trim(c.WriteUnits), per)
	}
}

// trim formats a measured quantity with up to three decimals, without
// trailing zeros.
func trim(x float64) string {
	s := strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", x), "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// price formats a price to ten decimals, without trailing zeros but
// with at least two decimals.
func price(x float64) string {
	s := strings.TrimRight(strconv.FormatFloat(x, 'f', 10, 64), "0")
	whole, frac, _ := strings.Cut(s, ".")
	for len(frac) < 2 {
		frac += "0"
	}
	return whole + "." + frac
}

// Thousands formats a count rounded to a whole number, with commas
// between thousands.
func Thousands(x float64) string {
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func bytes(n float64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}
