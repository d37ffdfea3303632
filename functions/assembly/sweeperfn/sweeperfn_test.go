package sweeperfn_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/workflowchat/service/functions/assembly/sweeperfn"
)

// TestInterruptedJobsIsEmbeddedMetricFormat: logged by the JSON handler
// the Lambda functions use, the attributes make a line CloudWatch reads as
// an embedded metric format record: the _aws directive names the
// namespace, the dimension set and the metric, whose value and dimension
// are members of the line.
func TestInterruptedJobsIsEmbeddedMetricFormat(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("sweep", append([]any{"ended", 3}, sweeperfn.InterruptedJobs("stack-SweeperFunction-x", 3, at)...)...)
	var line struct {
		Msg string `json:"msg"`
		AWS struct {
			Timestamp         int64 `json:"Timestamp"`
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		FunctionName    string
		InterruptedJobs *float64
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, buf.String())
	}
	d := line.AWS.CloudWatchMetrics
	if line.AWS.Timestamp != at.UnixMilli() || len(d) != 1 || d[0].Namespace != sweeperfn.MetricNamespace ||
		len(d[0].Dimensions) != 1 || len(d[0].Dimensions[0]) != 1 || d[0].Dimensions[0][0] != "FunctionName" ||
		len(d[0].Metrics) != 1 || d[0].Metrics[0].Name != sweeperfn.InterruptedJobsMetric || d[0].Metrics[0].Unit != "Count" {
		t.Fatalf("directive %+v, want namespace %s, dimensions [[FunctionName]], metric %s in Count\n%s",
			line.AWS, sweeperfn.MetricNamespace, sweeperfn.InterruptedJobsMetric, buf.String())
	}
	if line.FunctionName != "stack-SweeperFunction-x" || line.InterruptedJobs == nil || *line.InterruptedJobs != 3 || line.Msg != "sweep" {
		t.Fatalf("line %s, want the function name and InterruptedJobs 3 as members", buf.String())
	}
	if got := sweeperfn.InterruptedJobs("", 3, at); got != nil {
		t.Errorf("without a function name: %v, want no attributes", got)
	}
}
