package config_test

import (
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/config"
)

func TestLoadRateLimits(t *testing.T) {
	t.Parallel()
	c, err := config.Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitsTable != "rate_limits" || c.RateLimitMessages.String() != "30/m" || c.RateLimitStreams.String() != "30/m" ||
		c.RateLimitRuns.String() != "20/m" || c.RateLimitMessages.Name != "messages" || c.RateLimitStreams.Name != "streams" || c.RateLimitRuns.Name != "runs" ||
		c.RateLimitMCP.String() != "120/m" || c.RateLimitMCP.Name != "mcp requests" {
		t.Errorf("defaults: table %q, messages %+v, streams %+v, runs %+v", c.RateLimitsTable, c.RateLimitMessages, c.RateLimitStreams, c.RateLimitRuns)
	}

	c, err = config.Load(env(map[string]string{"RATE_LIMIT_MESSAGES": "2/m,100/h", "RATE_LIMIT_STREAMS": "0", "RATE_LIMIT_RUNS": "5/s", "RATE_LIMIT_MCP": "10/s,600/h", "RATE_LIMITS_TABLE": "rl"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitsTable != "rl" || c.RateLimitMessages.String() != "2/m,100/h" || c.RateLimitStreams.Enabled() || c.RateLimitRuns.String() != "5/s" ||
		c.RateLimitMCP.String() != "10/s,600/h" {
		t.Errorf("values: table %q, messages %+v, streams %+v, runs %+v", c.RateLimitsTable, c.RateLimitMessages, c.RateLimitStreams, c.RateLimitRuns)
	}

	// In Lambda the table has no default; the functions with limited
	// routes require it.
	c, err = config.Load(env(map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "f"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Require("RATE_LIMITS_TABLE"); err == nil || !strings.Contains(err.Error(), "RATE_LIMITS_TABLE") {
		t.Errorf("Require(RATE_LIMITS_TABLE) in Lambda = %v", err)
	}

	for _, name := range []string{"RATE_LIMIT_MESSAGES", "RATE_LIMIT_STREAMS", "RATE_LIMIT_RUNS", "RATE_LIMIT_MCP"} {
		_, err := config.Load(env(map[string]string{name: "30 per minute"}))
		if err == nil || !strings.Contains(err.Error(), "config: "+name+": ") || !strings.Contains(err.Error(), `"30 per minute"`) {
			t.Errorf("%s=30 per minute: %v, want an error naming the variable and the value", name, err)
		}
	}
}
