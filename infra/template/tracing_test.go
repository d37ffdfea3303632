package template_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ---------------------------------------------------------------------------
// (r) Tracing
// ---------------------------------------------------------------------------

const (
	tracingCondition = "TracingEnabled"
	tracingParam     = "OtelCollectorLayerArn"
	// otlpEndpointEnv is the exporter's endpoint (shared/tracing/otlp):
	// the collector layer's OTLP/HTTP receiver.
	otlpEndpointEnv   = "OTEL_EXPORTER_OTLP_ENDPOINT"
	collectorEndpoint = "http://localhost:4318"
)

// xrayActions are what the collector layer calls to send spans to X-Ray
// (sorted).
var xrayActions = []string{"xray:PutTelemetryRecords", "xray:PutTraceSegments"}

// xrayBlock is the conditional X-Ray policy as template.yaml writes it in
// every function that exports spans.
const xrayBlock = `        # Tracing (TracingEnabled): the collector layer sends this
        # function's spans to X-Ray (actions without resource-level
        # permissions, hence "*").
        - !If
          - TracingEnabled
          - Version: "2012-10-17"
            Statement:
              - Sid: XRay
                Effect: Allow
                Action: [xray:PutTraceSegments, xray:PutTelemetryRecords]
                Resource: "*"
          - !Ref AWS::NoValue
`

func countXRay(actions []string) int {
	n := 0
	for _, a := range actions {
		if strings.HasPrefix(a, "xray:") {
			n++
		}
	}
	return n
}

// exportsSpans reports whether a function's bootstrap (its main and the
// builders it imports) turns tracing on: it calls otlp.FromEnv, or
// assembly.Load or assembly.Lambda, which do.
func exportsSpans(main string) bool {
	for _, call := range []string{"otlp.FromEnv(", "assembly.Load(", "assembly.Lambda("} {
		if strings.Contains(main, call) {
			return true
		}
	}
	return false
}

// (r) Tracing is off by default and on with OtelCollectorLayerArn: the
// parameter (default empty), the TracingEnabled condition on it, the
// layer and OTEL_EXPORTER_OTLP_ENDPOINT (the layer's collector) in
// Globals under that condition only, set by no function itself, and no
// AWS_LAMBDA_EXEC_WRAPPER (the Go functions instrument themselves; the
// collector layer has no wrapper). X-Ray write permission goes exactly to
// the functions whose bootstrap exports spans, with exactly the
// collector's actions on "*" (X-Ray has no resource-level permissions),
// in a policy that exists only under TracingEnabled.
func checkTracing(s *stack, f *codeFacts) []string {
	var probs []string
	p := asMap(asMap(s.raw["Parameters"])[tracingParam])
	switch {
	case p == nil:
		probs = append(probs, "Parameters: no "+tracingParam)
	case p["Default"] != "":
		probs = append(probs, fmt.Sprintf("%s: Default %v, want \"\" (tracing off unless asked for)", tracingParam, p["Default"]))
	case p["AllowedPattern"] == nil:
		probs = append(probs, tracingParam+": no AllowedPattern (a layer ARN or empty)")
	}
	if !notEmptyParam(asMap(s.tree["Conditions"])[tracingCondition], tracingParam) {
		probs = append(probs, fmt.Sprintf("Conditions.%s must be !Not [!Equals [!Ref %s, \"\"]]", tracingCondition, tracingParam))
	}
	global := asMap(asMap(s.tree["Globals"])["Function"])
	wantLayers := map[string]any{"Fn::If": []any{tracingCondition, []any{refMark + tracingParam}, noValue}}
	if fmt.Sprint(global["Layers"]) != fmt.Sprint(wantLayers) {
		probs = append(probs, fmt.Sprintf("Globals.Function.Layers %v, want !If [%s, [!Ref %s], !Ref AWS::NoValue]", global["Layers"], tracingCondition, tracingParam))
	}
	globalEnv := asMap(asMap(global["Environment"])["Variables"])
	wantEnv := map[string]any{"Fn::If": []any{tracingCondition, collectorEndpoint, noValue}}
	if fmt.Sprint(globalEnv[otlpEndpointEnv]) != fmt.Sprint(wantEnv) {
		probs = append(probs, fmt.Sprintf("Globals.Function.Environment %s = %v, want !If [%s, %q, !Ref AWS::NoValue]", otlpEndpointEnv, globalEnv[otlpEndpointEnv], tracingCondition, collectorEndpoint))
	}
	for k := range globalEnv {
		if k == "AWS_LAMBDA_EXEC_WRAPPER" {
			probs = append(probs, "Globals.Function.Environment: AWS_LAMBDA_EXEC_WRAPPER; the Go functions instrument themselves and the collector layer has no wrapper")
		}
	}
	for _, id := range sortedKeys(s.functions) {
		props := asMap(s.treeResource(id)["Properties"])
		if _, ok := props["Layers"]; ok {
			probs = append(probs, id+": Layers of its own; the collector layer is global, under "+tracingCondition)
		}
		for k := range asMap(asMap(props["Environment"])["Variables"]) {
			if strings.HasPrefix(k, "OTEL_") || k == "AWS_LAMBDA_EXEC_WRAPPER" {
				probs = append(probs, fmt.Sprintf("%s: sets %s itself; tracing is configured in Globals only", id, k))
			}
		}
	}

	granted := map[string]bool{}
	for _, x := range statementsOf(s, func(actions []string) bool { return countXRay(actions) > 0 }) {
		granted[x.fn] = true
		if x.cond != tracingCondition {
			c := x.cond
			if c == "" {
				c = "none"
			}
			probs = append(probs, fmt.Sprintf("%s: X-Ray statement under condition %s; grant it only under the %s condition: !If [%s, {policy}, !Ref AWS::NoValue]", x.where, c, tracingCondition, tracingCondition))
		}
		if x.stmt["Effect"] != "Allow" {
			probs = append(probs, fmt.Sprintf("%s: Effect %v, want Allow", x.where, x.stmt["Effect"]))
		}
		for _, k := range []string{"NotAction", "NotResource", "Principal", "NotPrincipal", "Condition"} {
			if _, ok := x.stmt[k]; ok {
				probs = append(probs, fmt.Sprintf("%s: %s is not allowed", x.where, k))
			}
		}
		actions := strs(x.stmt["Action"])
		sort.Strings(actions)
		if !slices.Equal(actions, xrayActions) {
			probs = append(probs, fmt.Sprintf("%s: X-Ray actions %v, want %v (what the collector layer calls)", x.where, actions, xrayActions))
		}
		if r := strs(x.stmt["Resource"]); len(r) != 1 || r[0] != "*" {
			probs = append(probs, fmt.Sprintf("%s: Resource %v, want \"*\" (X-Ray has no resource-level permissions)", x.where, r))
		}
	}
	for _, id := range sortedKeys(s.functions) {
		dir := dirOfFunction(id)
		exports := exportsSpans(f.mains[dir])
		switch {
		case exports && !granted[id]:
			probs = append(probs, fmt.Sprintf("%s: functions/%s exports spans but has no X-Ray permission; the collector could not send them", id, dir))
		case granted[id] && !exports:
			probs = append(probs, fmt.Sprintf("%s: X-Ray permission but functions/%s exports no spans (it never calls otlp.FromEnv)", id, dir))
		}
	}
	return probs
}

// unconditionalXRay is xrayBlock without its condition.
const unconditionalXRay = `        - Version: "2012-10-17"
          Statement:
            - Sid: XRay
              Effect: Allow
              Action: [xray:PutTraceSegments, xray:PutTelemetryRecords]
              Resource: "*"
`

var tracingCases = []brokenCase{
	{"X-Ray granted whether or not tracing is on", "r_tracing", xrayBlock, unconditionalXRay, "X-Ray statement under condition none"},
	{"X-Ray wildcard", "r_tracing", "Action: [xray:PutTraceSegments, xray:PutTelemetryRecords]", "Action: [\"xray:*\"]", "X-Ray actions [xray:*]"},
	{"X-Ray on a resource", "r_tracing", "                Resource: \"*\"\n          - !Ref AWS::NoValue",
		"                Resource: [!GetAtt UsersTable.Arn]\n          - !Ref AWS::NoValue", "want \"*\""},
	{"a function that exports spans without X-Ray", "r_tracing", xrayBlock, "", "AuthFunction: functions/auth exports spans but has no X-Ray permission"},
	{"health granted X-Ray", "r_tracing", "      Description: GET /api/liveness (no storage, no policies beyond logging)\n",
		"      Description: GET /api/liveness (no storage, no policies beyond logging)\n      Policies:\n" + xrayBlock,
		"HealthFunction: X-Ray permission but functions/health exports no spans"},
	{"collector layer always on", "r_tracing", "    Layers: !If [TracingEnabled, [!Ref OtelCollectorLayerArn], !Ref AWS::NoValue]\n",
		"    Layers: [!Ref OtelCollectorLayerArn]\n", "Globals.Function.Layers"},
	{"endpoint always set", "r_tracing", `OTEL_EXPORTER_OTLP_ENDPOINT: !If [TracingEnabled, "http://localhost:4318", !Ref AWS::NoValue]`,
		`OTEL_EXPORTER_OTLP_ENDPOINT: http://localhost:4318`, "Globals.Function.Environment OTEL_EXPORTER_OTLP_ENDPOINT"},
	{"an exec wrapper the layer does not have", "r_tracing", "        LOG_FORMAT: json\n",
		"        LOG_FORMAT: json\n        AWS_LAMBDA_EXEC_WRAPPER: /opt/otel-instrument\n", "AWS_LAMBDA_EXEC_WRAPPER"},
	{"a function sets its own endpoint", "r_tracing", "          USERS_TABLE: !Ref UsersTable\n",
		"          USERS_TABLE: !Ref UsersTable\n          OTEL_EXPORTER_OTLP_ENDPOINT: http://collector:4318\n", "sets OTEL_EXPORTER_OTLP_ENDPOINT itself"},
	{"condition on another parameter", "r_tracing", `TracingEnabled: !Not [!Equals [!Ref OtelCollectorLayerArn, ""]]`,
		`TracingEnabled: !Not [!Equals [!Ref LogLevel, ""]]`, "Conditions.TracingEnabled must be"},
	{"tracing on by default", "r_tracing", "    Default: \"\"\n    AllowedPattern: ^(arn:aws[a-z-]*:lambda:",
		"    Default: \"arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1\"\n    AllowedPattern: ^(arn:aws[a-z-]*:lambda:",
		"OtelCollectorLayerArn: Default"},
	{"X-Ray mixed into a table policy", "d_iam_least_privilege", "              Action: [dynamodb:GetItem, dynamodb:PutItem]\n              Resource: [!GetAtt UsersTable.Arn]",
		"              Action: [dynamodb:GetItem, dynamodb:PutItem, xray:PutTraceSegments]\n              Resource: [!GetAtt UsersTable.Arn]", "mixes xray: and other actions"},
}
