package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
)

func TestHealthFunctionEvent(t *testing.T) {
	t.Parallel()
	h, err := newHandler(func(k string) string { return map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "HealthFunction"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	resp, err := lambdahttp.NewAPIGatewayV2(h)(context.Background(), lambdatest.LoadV2(t, "testdata/liveness.json"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("liveness: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	var body struct {
		Status    string    `json:"status"`
		Timestamp time.Time `json:"timestamp"`
		Data      any       `json:"data"`
	}
	lambdatest.DecodeBody(t, resp, &body)
	if body.Status != "ok" || time.Since(body.Timestamp).Abs() > time.Minute || body.Data != nil {
		t.Errorf("body = %s", resp.Body)
	}
}
