// Package lambdahttp runs the service's http.Handlers in AWS Lambda: behind
// an API Gateway HTTP API (payload format 2.0) through
// aws-lambda-go-api-proxy. The handler is the same one the local dev server
// and the tests mount.
package lambdahttp

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"net/http"

	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/tracing"
)

// APIGatewayV2Handler is the Lambda handler signature for HTTP API events.
type APIGatewayV2Handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// NewAPIGatewayV2 adapts h to HTTP API (payload v2) events. Request
// cookies, headers, path, query and (base64) body reach h as an
// *http.Request; h's status, headers, Set-Cookie headers and body become the
// response.
//
// When tracing is on, the spans of the request are exported before the
// handler returns (tracing.Flush): Lambda may freeze the process as soon
// as it has.
func NewAPIGatewayV2(h http.Handler) APIGatewayV2Handler {
	proxy := httpadapter.NewV2(h).ProxyWithContext
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		resp, err := proxy(ctx, ev)
		flush(ctx)
		return resp, err
	}
}

// flush exports the invocation's spans (tracing.Flush), logging a
// failure.
func flush(ctx context.Context) {
	if err := tracing.Flush(ctx); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "tracing: flush", "err", err.Error())
	}
}

// Start runs h as this Lambda function's handler for HTTP API events. It
// does not return.
func Start(h http.Handler) {
	lambda.Start(NewAPIGatewayV2(h))
}
