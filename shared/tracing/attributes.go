package tracing

import "go.opentelemetry.io/otel/attribute"

// The attribute keys the service sets. Those of the OpenTelemetry semantic
// conventions are written here rather than imported from the semconv
// packages: the GenAI and MCP attributes are still in development, so the
// current semconv packages leave them out, and a semconv package's
// thousands of attribute values are initialized at every cold start.
const (
	// HTTP (stable conventions).
	HTTPRequestMethod      = attribute.Key("http.request.method")
	HTTPRoute              = attribute.Key("http.route")
	HTTPResponseStatusCode = attribute.Key("http.response.status_code")
	URLScheme              = attribute.Key("url.scheme")
	URLPath                = attribute.Key("url.path")
	URLFull                = attribute.Key("url.full")
	ServerAddress          = attribute.Key("server.address")
	ServerPort             = attribute.Key("server.port")
	ErrorType              = attribute.Key("error.type")
	// RPCMethod is the tool server protocol's method of a call to it
	// (listTools, getTool, runTool...).
	RPCMethod = attribute.Key("rpc.method")

	// GenAI (development conventions).
	GenAIOperationName     = attribute.Key("gen_ai.operation.name")
	GenAIProviderName      = attribute.Key("gen_ai.provider.name")
	GenAIRequestModel      = attribute.Key("gen_ai.request.model")
	GenAIRequestMaxTokens  = attribute.Key("gen_ai.request.max_tokens")
	GenAIUsageInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	GenAIUsageOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	GenAIToolName          = attribute.Key("gen_ai.tool.name")
	GenAIToolType          = attribute.Key("gen_ai.tool.type")

	// MCP (development conventions).
	MCPMethodName = attribute.Key("mcp.method.name")

	// The service's own, under its namespace.
	RunID      = attribute.Key("workflowchat.run.id")
	RunAttempt = attribute.Key("workflowchat.run.attempt")
	StepIndex  = attribute.Key("workflowchat.step.index")
	StepStatus = attribute.Key("workflowchat.step.status")
	JobKind    = attribute.Key("workflowchat.job.kind")
	JobID      = attribute.Key("workflowchat.job.id")
	// SweptJobs is how many expired jobs a sweep handled.
	SweptJobs = attribute.Key("workflowchat.sweep.jobs")
)
