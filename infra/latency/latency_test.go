package latency_test

import (
	"testing"
	"time"

	"github.com/workflowchat/service/infra/latency"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i))
	}
	tests := []struct {
		p    float64
		want time.Duration
	}{{0.5, 51}, {0.99, 100}, {1, 100}, {0.01, 2}}
	for _, tt := range tests {
		if got := latency.Percentile(d, tt.p); got != tt.want {
			t.Errorf("p%v = %v, want %v", tt.p, got, tt.want)
		}
	}
	if latency.Percentile(nil, 0.5) != 0 {
		t.Error("empty")
	}
}
