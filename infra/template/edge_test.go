package template_test

// The Lambda edge of the stack: functions served by their own
// response-streaming function URL (the chat stream), the CloudFront
// distribution that puts them and the HTTP API on one origin for the
// browser, and the model providers' configuration and Bedrock permission.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const (
	noValue = refMark + "AWS::NoValue"

	distributionType = "AWS::CloudFront::Distribution"
	// Managed CloudFront policies (ids are the same in every account).
	cachingDisabled           = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
	allViewerExceptHostHeader = "b689b0a8-53d0-40ab-baf2-68738e2966ac"
	allViewer                 = "216adef6-5c7f-47e4-b989-5492eafa07d3"
	// httpAPIOriginDomain is the HTTP API's host name (its $default stage
	// needs no origin path).
	httpAPIOriginDomain = subMark + "${" + httpAPIID + "}.execute-api.${AWS::Region}.${AWS::URLSuffix}"

	// minStreamTimeout: a reply with tool calls may run for minutes; the
	// HTTP API's 30 s is what the stream escapes.
	minStreamTimeout = 300
	// minGatewayTimeout: the MCP gateway waits up to 50 s for a run
	// (mcpgateway.MaxCallWait) before answering with its id.
	minGatewayTimeout = 55

	// gatewayID is the MCP gateway (functions/mcpgateway), a streaming
	// function URL whose calls wait at most 50 s.
	gatewayID = "McpGatewayFunction"

	bedrockCondition = "BedrockEnabled"
	bedrockParam     = "BedrockModels"
)

// allMethods are CloudFront's "all methods": the API and the stream need
// POST, PATCH, DELETE and OPTIONS (preflight) besides GET and HEAD.
var allMethods = []string{"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"}

// providerEnv maps each model provider variable config.Load reads to the
// parameter that must feed it. config.Load validates them together (a
// model list without its key is refused at start-up), so a function gets
// all of them or none.
var providerEnv = map[string]string{
	"DEFAULT_MODEL_ID":  "DefaultModelId",
	"BEDROCK_MODELS":    bedrockParam,
	"OPENAI_API_KEY":    "OpenAIApiKey",
	"OPENAI_MODELS":     "OpenAIModels",
	"OPENAI_BASE_URL":   "OpenAIBaseUrl",
	"ANTHROPIC_API_KEY": "AnthropicApiKey",
	"ANTHROPIC_MODELS":  "AnthropicModels",
}

// secretParams are the provider parameters holding credentials.
var secretParams = []string{"OpenAIApiKey", "AnthropicApiKey"}

// optionalParams default to "": a plain deployment runs on the built-in
// model with no provider and no Bedrock permission.
var optionalParams = []string{bedrockParam, "OpenAIApiKey", "OpenAIModels", "OpenAIBaseUrl", "AnthropicApiKey", "AnthropicModels"}

// wantBedrock is the reviewed set of functions that invoke models (and so
// Bedrock when BedrockModels is set): their mains build the model registry
// and generate with it (chat replies; the workflow assistant's replies and
// proposals; llm_generate in the tool server; agent steps in the runner).
var wantBedrock = map[string]bool{
	"ChatsFunction":     true,
	"StreamFunction":    true,
	"WorkflowsFunction": true,
	"McpFunction":       true,
	"RunnerFunction":    true,
}

// modelListers build the model registry only to list and validate model
// ids (GET /api/models, preferences), never to generate: they receive the
// provider configuration but no Bedrock permission.
var modelListers = map[string]bool{
	"ModelsFunction": true,
}

// bedrockResource: foundation models (any region: a cross-region
// inference profile routes to several) and inference profiles of this
// account, by !Sub with the partition; never "*".
var bedrockResource = regexp.MustCompile(`^` + regexp.QuoteMeta(subMark) +
	`arn:\$\{AWS::Partition\}:bedrock:(\*|\$\{AWS::Region\})::foundation-model/\S+$|^` + regexp.QuoteMeta(subMark) +
	`arn:\$\{AWS::Partition\}:bedrock:\$\{AWS::Region\}:\$\{AWS::AccountId\}:(application-)?inference-profile/\S+$`)

// bedrockCalls maps Bedrock runtime client calls to their IAM action.
var bedrockCalls = map[string]string{
	".ConverseStream(":                "bedrock:InvokeModelWithResponseStream",
	".InvokeModelWithResponseStream(": "bedrock:InvokeModelWithResponseStream",
	".Converse(":                      "bedrock:InvokeModel",
	".InvokeModel(":                   "bedrock:InvokeModel",
}

// bedrockActionsOf reads the non-test Go files of dir and returns the IAM
// actions of the Bedrock runtime calls they make, sorted.
func bedrockActionsOf(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		for call, action := range bedrockCalls {
			if strings.Contains(string(src), call) {
				set[action] = true
			}
		}
	}
	return sortedKeys(set), nil
}

// registryBuildersOf returns the calls that build the model registry:
// providers.Registry, and every function of the packages under dir
// (functions/assembly/*) that calls it, directly or through another
// function of its package, as "<package>.<Func>".
func registryBuildersOf(dir string) ([]string, error) {
	builders := []string{"providers.Registry"}
	pkgDirs, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return builders, nil
	}
	if err != nil {
		return nil, err
	}
	for _, d := range pkgDirs {
		if !d.IsDir() {
			continue
		}
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(dir, d.Name(), "*.go"))
		if err != nil {
			return nil, err
		}
		pkg := ""
		calls := map[string]map[string]bool{} // func -> called names ("providers.Registry", "Models")
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				return nil, err
			}
			pkg = file.Name.Name
			for _, decl := range file.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Recv != nil || fd.Body == nil {
					continue
				}
				called := map[string]bool{}
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if c, ok := n.(*ast.CallExpr); ok {
						switch fn := c.Fun.(type) {
						case *ast.Ident:
							called[fn.Name] = true
						case *ast.SelectorExpr:
							if x, ok := fn.X.(*ast.Ident); ok {
								called[x.Name+"."+fn.Sel.Name] = true
							}
						}
					}
					return true
				})
				calls[fd.Name.Name] = called
			}
		}
		builds := map[string]bool{}
		for changed := true; changed; {
			changed = false
			for fn, called := range calls {
				if builds[fn] {
					continue
				}
				for c := range called {
					if c == "providers.Registry" || builds[c] {
						builds[fn], changed = true, true
						break
					}
				}
			}
		}
		for fn := range builds {
			if ast.IsExported(fn) {
				builders = append(builders, pkg+"."+fn)
			}
		}
	}
	sort.Strings(builders)
	return builders, nil
}

// buildsRegistry returns the registry builder main calls, if any.
func (f *codeFacts) buildsRegistry(main string) (string, bool) {
	for _, b := range f.registryBuilders {
		if strings.Contains(main, b+"(") {
			return b, true
		}
	}
	return "", false
}

func countBedrock(actions []string) int {
	n := 0
	for _, a := range actions {
		if strings.HasPrefix(a, "bedrock:") {
			n++
		}
	}
	return n
}

// fnCall returns the name and arguments of a kept intrinsic of the
// structural tree ({"Fn::If": [...]}).
func fnCall(v any) (string, []any, bool) {
	m := asMap(v)
	if len(m) != 1 {
		return "", nil, false
	}
	for k, args := range m {
		if strings.HasPrefix(k, "Fn::") {
			list, _ := args.([]any)
			return k, list, true
		}
	}
	return "", nil, false
}

// notEmptyParam reports whether v is !Not [!Equals [!Ref param, ""]] (in
// either argument order).
func notEmptyParam(v any, param string) bool {
	name, args, ok := fnCall(v)
	if !ok || name != "Fn::Not" || len(args) != 1 {
		return false
	}
	name, eq, ok := fnCall(args[0])
	if !ok || name != "Fn::Equals" || len(eq) != 2 {
		return false
	}
	ref := refMark + param
	return (eq[0] == ref && eq[1] == "") || (eq[0] == "" && eq[1] == ref)
}

// treeResource returns resource id of the structural tree.
func (s *stack) treeResource(id string) map[string]any {
	return asMap(asMap(s.tree["Resources"])[id])
}

// timeout returns the function's Timeout, Globals' when it has none.
func (s *stack) timeout(id string) int {
	t := deref(s.functions[id].Timeout)
	if t == 0 && s.globalFn != nil {
		t = deref(s.globalFn.Timeout)
	}
	return t
}

// dirOfFunction is the folder under functions/ of a <Dir>Function id.
func dirOfFunction(id string) string {
	return strings.ToLower(strings.TrimSuffix(id, "Function"))
}

// ---------------------------------------------------------------------------
// (i) Streaming function URLs
// ---------------------------------------------------------------------------

// (i) A function that infra/local serves by its own function URL (the
// chat stream) has no HttpApi events (the HTTP API buffers and stops at
// 30 s), a FunctionUrlConfig with InvokeMode RESPONSE_STREAM, and a
// timeout of at least minStreamTimeout. RESPONSE_STREAM and the main's
// lambdahttp.StartStreaming go together: a streaming URL in front of a
// buffered handler, or the reverse, breaks every response.
func checkStreamingURLs(s *stack, f *codeFacts) []string {
	var probs []string
	isURL := map[string]bool{}
	for _, lf := range f.routes {
		if !lf.FunctionURL {
			continue
		}
		isURL[lf.LogicalID] = true
		fn := s.functions[lf.LogicalID]
		if fn == nil {
			continue // check (b) reports it
		}
		if evs := httpAPIEvents(fn); len(evs) > 0 {
			probs = append(probs, fmt.Sprintf("%s: has HttpApi events %v; it is served by its function URL (through CloudFront), not by the HTTP API", lf.LogicalID, sortedKeys(evs)))
		}
		url := fn.FunctionUrlConfig
		if url == nil {
			probs = append(probs, fmt.Sprintf("%s: no FunctionUrlConfig; infra/local serves it by its own function URL", lf.LogicalID))
		} else if m := deref(url.InvokeMode); m != "RESPONSE_STREAM" {
			probs = append(probs, fmt.Sprintf("%s: FunctionUrlConfig.InvokeMode %q, want RESPONSE_STREAM (Server-Sent Events)", lf.LogicalID, m))
		}
		if lf.LogicalID == gatewayID {
			if t := s.timeout(lf.LogicalID); t < minGatewayTimeout {
				probs = append(probs, fmt.Sprintf("%s: Timeout %d, want at least %d s (a tools/call waits up to 50 s for its run)", lf.LogicalID, t, minGatewayTimeout))
			}
		} else if t := s.timeout(lf.LogicalID); t < minStreamTimeout {
			probs = append(probs, fmt.Sprintf("%s: Timeout %d, want at least %d s (a streamed reply may call tools and models for minutes)", lf.LogicalID, t, minStreamTimeout))
		}
		if !strings.Contains(f.mains[lf.Dir], "lambdahttp.StartStreaming)") {
			probs = append(probs, fmt.Sprintf("%s: functions/%s does not start with lambdahttp.StartStreaming", lf.LogicalID, lf.Dir))
		}
	}
	for _, id := range sortedKeys(s.functions) {
		url := s.functions[id].FunctionUrlConfig
		streams := url != nil && deref(url.InvokeMode) == "RESPONSE_STREAM"
		startsStreaming := strings.Contains(f.mains[dirOfFunction(id)], "lambdahttp.StartStreaming)")
		if streams && !startsStreaming {
			probs = append(probs, fmt.Sprintf("%s: InvokeMode RESPONSE_STREAM but functions/%s does not start with lambdahttp.StartStreaming", id, dirOfFunction(id)))
		}
		if startsStreaming && !streams {
			probs = append(probs, fmt.Sprintf("%s: functions/%s streams (lambdahttp.StartStreaming) but its FunctionUrlConfig is not RESPONSE_STREAM", id, dirOfFunction(id)))
		}
		if startsStreaming && !isURL[id] {
			probs = append(probs, fmt.Sprintf("%s: streams, but infra/local does not mark it FunctionURL", id))
		}
	}
	return probs
}

// ---------------------------------------------------------------------------
// (j) CloudFront: one origin for the browser
// ---------------------------------------------------------------------------

// cloudFrontPath turns a ServeMux pattern into the CloudFront PathPattern
// that must route it: each {param} segment becomes "*".
func cloudFrontPath(pattern string) string {
	_, path, ok := strings.Cut(pattern, " ")
	if !ok {
		path = pattern
	}
	path = strings.TrimSuffix(strings.TrimSpace(path), "{$}")
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			segs[i] = "*"
		}
	}
	return strings.Join(segs, "/")
}

// samplePath fills an API Gateway route path's parameters with a value.
func samplePath(path string) string {
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			segs[i] = "x1"
		}
	}
	return strings.Join(segs, "/")
}

// pathPatternMatches reports whether a CloudFront PathPattern matches
// path: "*" is any run of characters ("/" included), "?" one character,
// case-sensitive, leading "/" optional in the pattern.
func pathPatternMatches(pattern, path string) bool {
	if !strings.HasPrefix(pattern, "/") {
		pattern = "/" + pattern
	}
	re := regexp.QuoteMeta(pattern)
	re = strings.ReplaceAll(re, `\*`, `.*`)
	re = strings.ReplaceAll(re, `\?`, `.`)
	return regexp.MustCompile("^" + re + "$").MatchString(path)
}

func normalizePattern(p string) string {
	if !strings.HasPrefix(p, "/") {
		return "/" + p
	}
	return p
}

// functionURLOrigin recognizes the host name of a function URL:
// !Select [2, !Split ["/", !GetAtt <Function>Url.FunctionUrl]] (the URL is
// https://<host>/). It returns the function's logical id.
func functionURLOrigin(v any) (string, bool) {
	name, args, ok := fnCall(v)
	if !ok || name != "Fn::Select" || len(args) != 2 || fmt.Sprint(args[0]) != "2" {
		return "", false
	}
	name, split, ok := fnCall(args[1])
	if !ok || name != "Fn::Split" || len(split) != 2 || split[0] != "/" {
		return "", false
	}
	src, _ := split[1].(string)
	rest, ok := strings.CutPrefix(src, getAttMark)
	if !ok {
		return "", false
	}
	fn, ok := strings.CutSuffix(rest, "Url.FunctionUrl")
	return fn, ok && fn != ""
}

// (j) One CloudFront distribution puts the HTTP API and every function
// URL of infra/local's FunctionURL functions on one origin, so the
// host-only session cookie set by /api/auth/* reaches the stream:
//   - origins: the HTTP API (its execute-api host, HTTPS only) and, per
//     such function, its function URL's host (HTTPS only);
//   - the default behaviour targets the HTTP API; every route pattern of a
//     FunctionURL function, {param} as "*", is the PathPattern of a
//     behaviour that targets that function's URL origin, uncompressed
//     (compression buffers Server-Sent Events);
//   - every behaviour: all methods, the managed CachingDisabled cache
//     policy, the managed AllViewerExceptHostHeader origin request policy
//     (cookies, query strings and headers reach the origins, Host stays
//     the origin's: API Gateway and function URLs reject a foreign Host, so
//     AllViewer is refused), HTTPS for viewers, no legacy ForwardedValues;
//   - no HTTP API route is captured by a behaviour of another origin;
//   - outputs: ApiBaseUrl (the distribution, or its custom domain) and
//     each FunctionURL function's URL (for debugging).
func checkCloudFront(s *stack, f *codeFacts) []string {
	var probs []string
	var dists []string
	for id, r := range s.resources() {
		if r["Type"] == distributionType {
			dists = append(dists, id)
		}
	}
	sort.Strings(dists)
	if len(dists) != 1 {
		return append(probs, fmt.Sprintf("resources: %d of type %s (%v), want exactly one in front of the HTTP API and the stream", len(dists), distributionType, dists))
	}
	dist := dists[0]
	cfg := asMap(asMap(s.treeResource(dist)["Properties"])["DistributionConfig"])
	if cfg["Enabled"] != true {
		probs = append(probs, dist+": DistributionConfig.Enabled must be true")
	}

	// Origins.
	apiOrigins := map[string]bool{}
	urlOrigins := map[string]string{} // origin id -> function
	originIDs := map[string]bool{}
	origins, _ := cfg["Origins"].([]any)
	for i, o := range origins {
		om := asMap(o)
		id, _ := om["Id"].(string)
		if originIDs[id] {
			probs = append(probs, fmt.Sprintf("%s: origin id %q used twice", dist, id))
		}
		originIDs[id] = true
		where := fmt.Sprintf("%s: Origins[%d] (%s)", dist, i, id)
		if fn, ok := functionURLOrigin(om["DomainName"]); ok {
			urlOrigins[id] = fn
		} else if om["DomainName"] == httpAPIOriginDomain {
			apiOrigins[id] = true
			if p, _ := om["OriginPath"].(string); p != "" {
				probs = append(probs, fmt.Sprintf("%s: OriginPath %q; the HTTP API's $default stage has none", where, p))
			}
		}
		coc := asMap(om["CustomOriginConfig"])
		if pp := coc["OriginProtocolPolicy"]; pp != "https-only" {
			probs = append(probs, fmt.Sprintf("%s: CustomOriginConfig.OriginProtocolPolicy %v, want https-only", where, pp))
		}
	}
	if len(apiOrigins) == 0 {
		probs = append(probs, fmt.Sprintf("%s: no origin with DomainName !Sub \"${%s}.execute-api.${AWS::Region}.${AWS::URLSuffix}\"", dist, httpAPIID))
	}

	// Behaviours.
	type behaviour struct {
		where string
		m     map[string]any
	}
	def := behaviour{dist + ": DefaultCacheBehavior", asMap(cfg["DefaultCacheBehavior"])}
	var others []behaviour
	list, _ := cfg["CacheBehaviors"].([]any)
	for i, b := range list {
		bm := asMap(b)
		others = append(others, behaviour{fmt.Sprintf("%s: CacheBehaviors[%d] (%v)", dist, i, bm["PathPattern"]), bm})
	}
	if t, _ := def.m["TargetOriginId"].(string); !apiOrigins[t] {
		probs = append(probs, fmt.Sprintf("%s targets origin %q, want the HTTP API's origin", def.where, t))
	}
	for _, b := range append([]behaviour{def}, others...) {
		if t, _ := b.m["TargetOriginId"].(string); !originIDs[t] {
			probs = append(probs, fmt.Sprintf("%s: TargetOriginId %q is not an origin", b.where, t))
		}
		methods := strs(b.m["AllowedMethods"])
		sort.Strings(methods)
		if !slices.Equal(methods, allMethods) {
			probs = append(probs, fmt.Sprintf("%s: AllowedMethods %v, want all of %v", b.where, methods, allMethods))
		}
		if c := b.m["CachePolicyId"]; c != cachingDisabled {
			probs = append(probs, fmt.Sprintf("%s: CachePolicyId %v, want CachingDisabled (%s): responses are per user", b.where, c, cachingDisabled))
		}
		switch o := b.m["OriginRequestPolicyId"]; o {
		case allViewerExceptHostHeader:
		case allViewer:
			probs = append(probs, fmt.Sprintf("%s: OriginRequestPolicyId AllViewer forwards Host, which API Gateway and function URLs reject; want AllViewerExceptHostHeader (%s)", b.where, allViewerExceptHostHeader))
		default:
			probs = append(probs, fmt.Sprintf("%s: OriginRequestPolicyId %v, want AllViewerExceptHostHeader (%s): cookies, query strings and headers to the origin", b.where, o, allViewerExceptHostHeader))
		}
		if v := b.m["ViewerProtocolPolicy"]; v != "redirect-to-https" && v != "https-only" {
			probs = append(probs, fmt.Sprintf("%s: ViewerProtocolPolicy %v, want redirect-to-https (the session cookie is Secure)", b.where, v))
		}
		if _, ok := b.m["ForwardedValues"]; ok {
			probs = append(probs, fmt.Sprintf("%s: ForwardedValues (legacy); use the cache and origin request policies", b.where))
		}
	}

	// Every route of a FunctionURL function has a behaviour to its URL.
	for _, lf := range f.routes {
		if !lf.FunctionURL {
			continue
		}
		for _, p := range lf.Patterns {
			want := cloudFrontPath(p)
			var b *behaviour
			for i := range others {
				if pp, _ := others[i].m["PathPattern"].(string); normalizePattern(pp) == want {
					b = &others[i]
					break
				}
			}
			if b == nil {
				probs = append(probs, fmt.Sprintf("%s: route %q has no CloudFront cache behaviour with PathPattern %s", lf.LogicalID, p, want))
				continue
			}
			target, _ := b.m["TargetOriginId"].(string)
			if fn, ok := urlOrigins[target]; !ok || fn != lf.LogicalID {
				what := "the HTTP API or an unknown origin"
				if ok {
					what = fn + "'s function URL"
				}
				probs = append(probs, fmt.Sprintf("%s targets origin %s (%s), which is not %s's function URL", b.where, target, what, lf.LogicalID))
			}
			if b.m["Compress"] == true {
				probs = append(probs, fmt.Sprintf("%s: Compress true; compression buffers the event stream", b.where))
			}
		}
	}

	// No HTTP API route is captured by a behaviour of another origin.
	for _, id := range sortedKeys(s.functions) {
		evs := httpAPIEvents(s.functions[id])
		for _, name := range sortedKeys(evs) {
			path := deref(evs[name].Path)
			if path == "" {
				continue
			}
			for _, b := range others {
				pp, _ := b.m["PathPattern"].(string)
				target, _ := b.m["TargetOriginId"].(string)
				if !apiOrigins[target] && pathPatternMatches(pp, samplePath(path)) {
					probs = append(probs, fmt.Sprintf("%s route %s %s is captured by %s (origin %s), not the HTTP API", id, deref(evs[name].Method), path, b.where, target))
				}
			}
		}
	}

	// Outputs.
	outputs := asMap(s.tree["Outputs"])
	wantBase := subMark + "https://${" + dist + ".DomainName}"
	base, ok := outputs["ApiBaseUrl"]
	if !ok {
		probs = append(probs, fmt.Sprintf("Outputs: no ApiBaseUrl (!Sub https://${%s.DomainName}): the one origin for the browser", dist))
	} else if v := asMap(base)["Value"]; v != wantBase {
		name, args, isFn := fnCall(v)
		custom := ""
		if isFn && name == "Fn::If" && len(args) == 3 && args[2] == wantBase {
			custom, _ = args[1].(string)
		}
		param, isCustom := strings.CutPrefix(custom, subMark+"https://${")
		param, isCustom = strings.CutSuffix(param, "}")
		aliases := fmt.Sprint(cfg["Aliases"])
		if !isCustom || !strings.Contains(aliases, refMark+param) {
			probs = append(probs, fmt.Sprintf("Outputs.ApiBaseUrl = %v, want %s (or, under a condition, https:// and an alias of the distribution)", v, wantBase))
		}
	}
	values := map[string]bool{}
	for _, o := range outputs {
		if v, ok := asMap(o)["Value"].(string); ok {
			values[v] = true
		}
	}
	for _, lf := range f.routes {
		if lf.FunctionURL && !values[getAttMark+lf.LogicalID+"Url.FunctionUrl"] {
			probs = append(probs, fmt.Sprintf("Outputs: no output with %s's function URL (!GetAtt %sUrl.FunctionUrl), for debugging", lf.LogicalID, lf.LogicalID))
		}
	}
	return probs
}

// ---------------------------------------------------------------------------
// (k) Model providers
// ---------------------------------------------------------------------------

// bedrockStatement is a policy statement naming a bedrock: action, with
// the condition it is under: "" unconditional, else the Fn::If condition
// name; "not <name>" in an else branch, "<name> with an else branch" when
// the If has an alternative other than AWS::NoValue. Only the plain
// "<name>" form (the policy or nothing) passes.
type bedrockStatement struct {
	fn, where, cond string
	stmt            map[string]any
}

// bedrockStatements walks every function's Policies in the structural
// tree.
func bedrockStatements(s *stack) []bedrockStatement {
	return statementsOf(s, func(actions []string) bool { return countBedrock(actions) > 0 && !isEmbeddingActions(actions) })
}

// statementsOf walks every function's Policies in the structural tree for
// the statements whose actions match, with the condition each is under.
func statementsOf(s *stack, match func(actions []string) bool) []bedrockStatement {
	var out []bedrockStatement
	var visit func(id, where, cond string, v any, level int)
	visit = func(id, where, cond string, v any, level int) {
		if name, args, ok := fnCall(v); ok && name == "Fn::If" && len(args) == 3 {
			c := fmt.Sprint(args[0])
			if args[2] != noValue {
				visit(id, where+".else", "not "+c, args[2], level)
				c += " with an else branch"
			}
			visit(id, where+".then", c, args[1], level)
			return
		}
		m := asMap(v)
		if m == nil {
			return
		}
		if level == 0 { // a policy document
			stmts, isList := m["Statement"].([]any)
			if !isList {
				stmts = []any{m["Statement"]}
			}
			for j, st := range stmts {
				visit(id, fmt.Sprintf("%s.Statement[%d]", where, j), cond, st, 1)
			}
			return
		}
		if match(strs(m["Action"])) {
			out = append(out, bedrockStatement{fn: id, where: where, cond: cond, stmt: m})
		}
	}
	for _, id := range sortedKeys(s.functions) {
		pol := asMap(s.treeResource(id)["Properties"])["Policies"]
		docs, isList := pol.([]any)
		if !isList && pol != nil {
			docs = []any{pol}
		}
		for i, d := range docs {
			visit(id, fmt.Sprintf("%s: Policies[%d]", id, i), "", d, 0)
		}
	}
	return out
}

// (k) Model providers: their parameters (keys NoEcho, everything optional
// with the built-in model as the fallback), the environment (each provider
// variable is !Ref of its parameter, per function and never global, all
// or none of them, and all of them where the main builds the registry with
// providers.Registry; no output reveals a key), and Bedrock: only the
// reviewed model-invoking functions (wantBedrock) may call it, with
// exactly the actions the code's Bedrock calls need, on foundation models
// and inference profiles, in a policy that exists only under the
// BedrockEnabled condition (BedrockModels non-empty).
func checkModelProviders(s *stack, f *codeFacts) []string {
	var probs []string
	params := asMap(s.raw["Parameters"])
	for _, env := range sortedKeys(providerEnv) {
		if params[providerEnv[env]] == nil {
			probs = append(probs, fmt.Sprintf("Parameters: no %s (%s)", providerEnv[env], env))
		}
	}
	for _, p := range secretParams {
		if pm := asMap(params[p]); pm != nil && pm["NoEcho"] != true {
			probs = append(probs, fmt.Sprintf("%s: NoEcho must be true (a credential)", p))
		}
	}
	for _, p := range optionalParams {
		if pm := asMap(params[p]); pm != nil && pm["Default"] != "" {
			probs = append(probs, fmt.Sprintf("%s: Default %v, want \"\" (providers are optional)", p, pm["Default"]))
		}
	}

	if s.globalFn != nil && s.globalFn.Environment != nil {
		for _, k := range sortedKeys(s.globalFn.Environment.Variables) {
			if _, ok := providerEnv[k]; ok {
				probs = append(probs, fmt.Sprintf("Globals.Function.Environment %s: per function, only where the code builds the model registry", k))
			}
		}
	}
	for _, id := range sortedKeys(s.functions) {
		env := s.env(s.functions[id])
		var got, missing []string
		for _, k := range sortedKeys(providerEnv) {
			v, ok := env[k]
			if !ok {
				missing = append(missing, k)
				continue
			}
			got = append(got, k)
			if v != refMark+providerEnv[k] {
				probs = append(probs, fmt.Sprintf("%s: %s = %q, want !Ref %s", id, k, v, providerEnv[k]))
			}
		}
		if len(got) > 0 && len(missing) > 0 {
			probs = append(probs, fmt.Sprintf("%s: receives %v but not %v; config.Load validates them together", id, got, missing))
		}
		dir := dirOfFunction(id)
		builder, builds := f.buildsRegistry(f.mains[dir])
		if builds {
			for _, k := range missing {
				probs = append(probs, fmt.Sprintf("%s: functions/%s builds the model registry (%s) but does not receive %s", id, dir, builder, k))
			}
			if !wantBedrock[id] && !modelListers[id] {
				probs = append(probs, fmt.Sprintf("%s: functions/%s builds the model registry (%s) but is neither in wantBedrock nor in modelListers; review whether it invokes models", id, dir, builder))
			}
		} else if wantBedrock[id] || modelListers[id] {
			probs = append(probs, fmt.Sprintf("%s: in wantBedrock/modelListers but functions/%s does not build the model registry (%v); drop it and its provider configuration", id, dir, f.registryBuilders))
		}
	}
	for _, name := range sortedKeys(s.tmpl.Outputs) {
		v := fmt.Sprint(s.tmpl.Outputs[name].Value)
		for _, p := range secretParams {
			if strings.Contains(v, p) {
				probs = append(probs, fmt.Sprintf("Outputs.%s reveals %s", name, p))
			}
		}
	}

	// Bedrock.
	if !notEmptyParam(asMap(s.tree["Conditions"])[bedrockCondition], bedrockParam) {
		probs = append(probs, fmt.Sprintf("Conditions.%s must be !Not [!Equals [!Ref %s, \"\"]]", bedrockCondition, bedrockParam))
	}
	granted := map[string]bool{}
	for _, b := range bedrockStatements(s) {
		granted[b.fn] = true
		if b.cond != bedrockCondition {
			c := b.cond
			if c == "" {
				c = "none"
			}
			probs = append(probs, fmt.Sprintf("%s: Bedrock statement under condition %s; grant it only under the %s condition: !If [%s, {policy}, !Ref AWS::NoValue]", b.where, c, bedrockCondition, bedrockCondition))
		}
		if b.stmt["Effect"] != "Allow" {
			probs = append(probs, fmt.Sprintf("%s: Effect %v, want Allow", b.where, b.stmt["Effect"]))
		}
		for _, k := range []string{"NotAction", "NotResource", "Principal", "NotPrincipal"} {
			if _, ok := b.stmt[k]; ok {
				probs = append(probs, fmt.Sprintf("%s: %s is not allowed", b.where, k))
			}
		}
		actions := strs(b.stmt["Action"])
		sort.Strings(actions)
		if !slices.Equal(actions, f.bedrockActions) {
			probs = append(probs, fmt.Sprintf("%s: Bedrock actions %v, want %v (the calls in shared/model/bedrock)", b.where, actions, f.bedrockActions))
		}
		resources := strs(b.stmt["Resource"])
		if len(resources) == 0 {
			probs = append(probs, b.where+": no Resource")
		}
		for _, r := range resources {
			if !bedrockResource.MatchString(r) {
				probs = append(probs, fmt.Sprintf("%s: resource %q; want foundation-model or inference-profile ARNs by !Sub with ${AWS::Partition}", b.where, r))
			}
		}
	}
	for _, id := range sortedKeys(s.functions) {
		switch {
		case granted[id] && !wantBedrock[id]:
			probs = append(probs, fmt.Sprintf("%s: Bedrock permission but not in wantBedrock (it does not invoke models)", id))
		case wantBedrock[id] && !granted[id]:
			probs = append(probs, fmt.Sprintf("%s: in wantBedrock but has no Bedrock permission; Bedrock models would fail with AccessDenied", id))
		}
	}
	for _, id := range sortedKeys(wantBedrock) {
		if s.functions[id] == nil {
			probs = append(probs, fmt.Sprintf("wantBedrock: %s is not a function of the template", id))
		} else if s.env(s.functions[id])["BEDROCK_MODELS"] == "" {
			probs = append(probs, fmt.Sprintf("%s: may call Bedrock but does not receive BEDROCK_MODELS", id))
		}
	}
	return probs
}

// ---------------------------------------------------------------------------
// Broken templates for checks (i), (j), (k) and the edge parts of (b), (d)
// ---------------------------------------------------------------------------

// streamHTTPEvent gives StreamFunction an HttpApi event.
const streamHTTPEvent = "        InvokeMode: RESPONSE_STREAM\n" +
	"      Events:\n        Stream:\n          Type: HttpApi\n          Properties:\n            ApiId: !Ref HttpApi\n" +
	"            Method: POST\n            Path: /api/chats/{chatId}/messages/stream\n"

// bedrockPolicy is the conditional Bedrock policy as template.yaml writes
// it (McpFunction's is the first occurrence).
const bedrockPolicy = "        - !If\n          - BedrockEnabled\n          - Version: \"2012-10-17\"\n"

// bedrockBlock is the whole conditional Bedrock policy.
const bedrockBlock = bedrockPolicy + `            Statement:
              - Sid: Bedrock
                Effect: Allow
                Action: [bedrock:InvokeModelWithResponseStream]
                Resource:
                  - !Sub arn:${AWS::Partition}:bedrock:*::foundation-model/*
                  - !Sub arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/*
          - !Ref AWS::NoValue
`

var edgeCases = []brokenCase{
	// (d) IAM of the new functions.
	{"chats loses the batch delete", "d_iam_reviewed_contract",
		"                - dynamodb:BatchWriteItem\n", "", "ChatsFunction on DataTable"},
	{"chats index grant widened", "d_iam_least_privilege",
		"Action: [dynamodb:Query]\n              Resource: [!Sub \"${DataTable.Arn}/index/GSI1\"]",
		"Action: [dynamodb:Query, dynamodb:GetItem]\n              Resource: [!Sub \"${DataTable.Arn}/index/GSI1\"]", "grant only dynamodb:Query on indexes"},
	{"stream cannot record a reply's usage", "d_iam_reviewed_contract",
		"            # (UpdateItem ADD); the gate reads the tool policies (GetItem on\n            # TOOLPOLICY#).\n            - Sid: Users\n              Effect: Allow\n              Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt UsersTable.Arn]\n            # The auth middleware reads the session and renews it.\n            - Sid: Sessions\n              Effect: Allow\n              Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt SessionsTable.Arn]\n            # StartStream",
		"            # (UpdateItem ADD); the gate reads the tool policies (GetItem on\n            # TOOLPOLICY#).\n            - Sid: Users\n              Effect: Allow\n              Action: [dynamodb:GetItem]\n              Resource: [!GetAtt UsersTable.Arn]\n            # The auth middleware reads the session and renews it.\n            - Sid: Sessions\n              Effect: Allow\n              Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt SessionsTable.Arn]\n            # StartStream",
		"StreamFunction on UsersTable"},
	{"stream without the table name its main requires", "d_iam_least_privilege",
		"          # The budget check and the usage of replies (USAGE# items).\n          USERS_TABLE: !Ref UsersTable\n",
		"          # The budget check and the usage of replies (USAGE# items).\n",
		"StreamFunction: may access UsersTable but does not receive its name"},
	{"Bedrock mixed into a DynamoDB statement", "d_iam_least_privilege",
		"Action: [bedrock:InvokeModelWithResponseStream]", "Action: [bedrock:InvokeModelWithResponseStream, dynamodb:Scan]", "mixes bedrock: and other actions"},
	// (b) The chats routes.
	{"chats route missing", "b_routes_match_routers",
		"            Method: GET\n            Path: /api/users/{userId}/chats\n", "            Method: GET\n            Path: /api/users/{userId}/chat\n",
		"ChatsFunction: route GET /api/users/{userId}/chats is registered by its router but has no HttpApi event"},

	// (i) Streaming function URLs.
	{"stream URL buffered", "i_streaming_function_urls",
		"InvokeMode: RESPONSE_STREAM", "InvokeMode: BUFFERED", "want RESPONSE_STREAM"},
	{"stream routed through the HTTP API", "i_streaming_function_urls",
		"        InvokeMode: RESPONSE_STREAM\n", streamHTTPEvent, "StreamFunction: has HttpApi events"},
	{"stream without a function URL", "i_streaming_function_urls",
		"      FunctionUrlConfig:\n        AuthType: NONE\n        InvokeMode: RESPONSE_STREAM\n", "", "StreamFunction: no FunctionUrlConfig"},
	{"stream times out like an API call", "i_streaming_function_urls",
		"      Timeout: 600\n", "      Timeout: 30\n", "want at least 300"},
	{"tool server streams to a buffered handler", "i_streaming_function_urls",
		"InvokeMode: BUFFERED", "InvokeMode: RESPONSE_STREAM", "McpFunction: InvokeMode RESPONSE_STREAM but functions/mcp does not start with lambdahttp.StartStreaming"},

	// (j) CloudFront.
	{"no distribution", "j_cloudfront_single_origin",
		"    Type: AWS::CloudFront::Distribution\n", "    Type: Custom::Distribution\n", "0 of type AWS::CloudFront::Distribution"},
	{"stream path not routed", "j_cloudfront_single_origin",
		"PathPattern: /api/chats/*/messages/stream", "PathPattern: /api/chats/*/stream",
		"has no CloudFront cache behaviour with PathPattern /api/chats/*/messages/stream"},
	{"stream behaviour targets the HTTP API", "j_cloudfront_single_origin",
		"            TargetOriginId: StreamFunctionUrl\n", "            TargetOriginId: HttpApi\n", "targets origin HttpApi (the HTTP API or an unknown origin)"},
	{"stream origin is another function's URL", "j_cloudfront_single_origin",
		"!GetAtt StreamFunctionUrl.FunctionUrl]]", "!GetAtt McpFunctionUrl.FunctionUrl]]", "(McpFunction's function URL), which is not StreamFunction's"},
	{"stream origin is the whole URL", "j_cloudfront_single_origin",
		"DomainName: !Select [2, !Split [\"/\", !GetAtt StreamFunctionUrl.FunctionUrl]]", "DomainName: !GetAtt StreamFunctionUrl.FunctionUrl", "which is not StreamFunction's function URL"},
	{"default behaviour not the HTTP API", "j_cloudfront_single_origin",
		"          TargetOriginId: HttpApi\n", "          TargetOriginId: StreamFunctionUrl\n", "DefaultCacheBehavior targets origin \"StreamFunctionUrl\""},
	{"API origin by another host", "j_cloudfront_single_origin",
		"DomainName: !Sub \"${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}\"", "DomainName: api.example.com", "no origin with DomainName"},
	{"API cached", "j_cloudfront_single_origin",
		"\n          CachePolicyId: 4135ea2d-6df8-44a3-9df3-4b5a84be39ad", "\n          CachePolicyId: 658327ea-f89d-4fab-a63d-7e88639e58f6", "DefaultCacheBehavior: CachePolicyId 658327ea"},
	{"stream cached", "j_cloudfront_single_origin",
		"            CachePolicyId: 4135ea2d-6df8-44a3-9df3-4b5a84be39ad", "            CachePolicyId: 658327ea-f89d-4fab-a63d-7e88639e58f6", "(/api/chats/*/messages/stream): CachePolicyId"},
	{"cookies not forwarded to the API", "j_cloudfront_single_origin",
		"\n          OriginRequestPolicyId: b689b0a8-53d0-40ab-baf2-68738e2966ac", "", "DefaultCacheBehavior: OriginRequestPolicyId <nil>"},
	{"Host forwarded to the stream", "j_cloudfront_single_origin",
		"            OriginRequestPolicyId: b689b0a8-53d0-40ab-baf2-68738e2966ac", "            OriginRequestPolicyId: 216adef6-5c7f-47e4-b989-5492eafa07d3", "AllViewer forwards Host"},
	{"stream compressed", "j_cloudfront_single_origin",
		"            Compress: false\n", "            Compress: true\n", "compression buffers the event stream"},
	{"stream methods limited", "j_cloudfront_single_origin",
		"            AllowedMethods: [GET, HEAD, OPTIONS, PUT, PATCH, POST, DELETE]", "            AllowedMethods: [GET, HEAD]", "AllowedMethods [GET HEAD]"},
	{"plain http for viewers", "j_cloudfront_single_origin",
		"ViewerProtocolPolicy: redirect-to-https", "ViewerProtocolPolicy: allow-all", "ViewerProtocolPolicy allow-all"},
	{"origin over plain http", "j_cloudfront_single_origin",
		"              OriginProtocolPolicy: https-only\n", "              OriginProtocolPolicy: http-only\n", "want https-only"},
	{"API route captured by the stream behaviour", "j_cloudfront_single_origin",
		"PathPattern: /api/chats/*/messages/stream", "PathPattern: /api/chats/*/messages*", "route GET /api/chats/{chatId}/messages is captured"},
	{"no ApiBaseUrl output", "j_cloudfront_single_origin",
		"  ApiBaseUrl:\n", "  AppBase:\n", "no ApiBaseUrl"},
	{"ApiBaseUrl not the distribution", "j_cloudfront_single_origin",
		"      - !Sub https://${Distribution.DomainName}\n", "      - !Sub https://example.com\n", "Outputs.ApiBaseUrl"},
	{"no stream URL output", "j_cloudfront_single_origin",
		"    Value: !GetAtt StreamFunctionUrl.FunctionUrl\n", "    Value: none\n", "no output with StreamFunction's function URL"},

	// (k) Model providers.
	{"Bedrock under another condition", "k_model_providers",
		bedrockPolicy, "        - !If\n          - CorsEnabled\n          - Version: \"2012-10-17\"\n", "Bedrock statement under condition CorsEnabled"},
	{"Bedrock unconditional", "k_model_providers",
		bedrockPolicy + "            Statement:\n", "        - Version: \"2012-10-17\"\n          Statement:\n            - Effect: Allow\n              Action: [bedrock:InvokeModelWithResponseStream]\n              Resource: [!Sub \"arn:${AWS::Partition}:bedrock:*::foundation-model/*\"]\n        - !If\n          - BedrockEnabled\n          - Version: \"2012-10-17\"\n            Statement:\n",
		"Bedrock statement under condition none"},
	{"Bedrock condition ignores the parameter", "k_model_providers",
		"  BedrockEnabled: !Not [!Equals [!Ref BedrockModels, \"\"]]", "  BedrockEnabled: !Not [!Equals [!Ref LogLevel, \"\"]]", "Conditions.BedrockEnabled must be"},
	{"Bedrock on every resource", "k_model_providers",
		"                  - !Sub arn:${AWS::Partition}:bedrock:*::foundation-model/*\n", "                  - \"*\"\n", `resource "*"`},
	{"Bedrock action the code does not call", "k_model_providers",
		"Action: [bedrock:InvokeModelWithResponseStream]", "Action: [bedrock:InvokeModelWithResponseStream, bedrock:InvokeModel]", "want [bedrock:InvokeModelWithResponseStream]"},
	{"Bedrock for a function that does not invoke models", "k_model_providers",
		"          # The audit log (a tool policy changed).\n          DATA_TABLE: !Ref DataTable\n      Policies:\n",
		"          # The audit log (a tool policy changed).\n          DATA_TABLE: !Ref DataTable\n      Policies:\n" + bedrockBlock,
		"ToolsFunction: Bedrock permission but not in wantBedrock"},
	{"model caller without Bedrock", "k_model_providers",
		bedrockBlock, "", "McpFunction: in wantBedrock but has no Bedrock permission"},
	{"API key echoed", "k_model_providers",
		"    NoEcho: true\n    Description: >\n      OPENAI_API_KEY", "    NoEcho: false\n    Description: >\n      OPENAI_API_KEY", "OpenAIApiKey: NoEcho must be true"},
	{"provider on by default", "k_model_providers",
		"    Default: \"\"\n    AllowedPattern: ^[^\\s]*$\n    ConstraintDescription: comma-separated ids without spaces", "    Default: amazon.nova-lite-v1:0\n    AllowedPattern: ^[^\\s]*$\n    ConstraintDescription: comma-separated ids without spaces", "BedrockModels: Default amazon.nova-lite-v1:0"},
	{"model list without its key", "k_model_providers",
		"          ANTHROPIC_API_KEY: !Ref AnthropicApiKey\n", "", "ModelsFunction: receives [ANTHROPIC_MODELS"},
	{"model caller without provider configuration", "k_model_providers",
		"          MCP_SERVICE_KEY: !Ref MCPServiceKey\n          # Model providers (config.Load validates them together).\n          DEFAULT_MODEL_ID: !Ref DefaultModelId\n          BEDROCK_MODELS: !Ref BedrockModels\n",
		"          MCP_SERVICE_KEY: !Ref MCPServiceKey\n          DEFAULT_MODEL_ID: !Ref DefaultModelId\n",
		"ChatsFunction: functions/chats builds the model registry (providers.Registry) but does not receive BEDROCK_MODELS"},
	{"API key as a literal", "k_model_providers",
		"OPENAI_API_KEY: !Ref OpenAIApiKey", "OPENAI_API_KEY: sk-test", `OPENAI_API_KEY = "sk-test"`},
	{"API key given to every function", "k_model_providers",
		"        LOG_FORMAT: json\n", "        LOG_FORMAT: json\n        OPENAI_API_KEY: !Ref OpenAIApiKey\n", "Globals.Function.Environment OPENAI_API_KEY"},
	{"API key in an output", "k_model_providers",
		"Outputs:\n", "Outputs:\n  Key:\n    Value: !Ref AnthropicApiKey\n", "Outputs.Key reveals AnthropicApiKey"},
}

// TestChecksCatchCodeDrift changes the code side in memory, one way per
// case, and requires the named check to report it on the unchanged
// template.yaml: the checks that read the code follow it.
func TestChecksCatchCodeDrift(t *testing.T) {
	t.Parallel()
	s, err := parse(loadTemplate(t))
	if err != nil {
		t.Fatal(err)
	}
	base := loadFacts(t)
	byName := map[string]check{}
	for _, c := range checks {
		byName[c.name] = c.fn
	}
	cases := []struct {
		name, check string
		drift       func(f *codeFacts)
		want        string
	}{
		{"new workflow route", "b_routes_match_routers", func(f *codeFacts) {
			for i := range f.routes {
				if f.routes[i].LogicalID == "WorkflowsFunction" {
					f.routes[i].Patterns = append(f.routes[i].Patterns, "GET /api/workflows/{workflowId}/schedule")
				}
			}
		}, "WorkflowsFunction: route GET /api/workflows/{workflowId}/schedule is registered by its router but has no HttpApi event"},
		{"workflows stops building the model registry", "k_model_providers", func(f *codeFacts) {
			f.mains["workflows"] = strings.ReplaceAll(f.mains["workflows"], "providers.Registry(", "offlineModels(")
		}, "WorkflowsFunction: in wantBedrock/modelListers but functions/workflows does not build the model registry"},
		{"health builds the model registry", "k_model_providers", func(f *codeFacts) {
			f.mains["health"] += "\nvar _, _ = providers.Registry(ctx, cfg)\n"
		}, "HealthFunction: functions/health builds the model registry (providers.Registry) but is neither in wantBedrock nor in modelListers"},
		{"tool server stops building the model registry", "k_model_providers", func(f *codeFacts) {
			f.mains["mcp"] = strings.ReplaceAll(strings.ReplaceAll(f.mains["mcp"], "providers.Registry(", "builtinModels("), "mcpfn.Mcp(", "builtinTools(")
		}, "McpFunction: in wantBedrock/modelListers but functions/mcp does not build the model registry"},
		{"dev server mounts another builder", "a_functions_match_folders", func(f *codeFacts) {
			for i := range f.routes {
				if f.routes[i].LogicalID == "ChatsFunction" {
					f.routes[i].Builder = strings.Replace(f.routes[i].Builder, ".Chats", ".Stream", 1)
				}
			}
		}, "ChatsFunction: infra/local builds it with github.com/workflowchat/service/functions/assembly/chatsfn.Stream but functions/chats/main.go calls"},
		{"Bedrock provider switches to Converse", "k_model_providers", func(f *codeFacts) {
			f.bedrockActions = []string{"bedrock:InvokeModel"}
		}, "want [bedrock:InvokeModel]"},
		{"stream no longer streams", "i_streaming_function_urls", func(f *codeFacts) {
			f.mains["stream"] = strings.ReplaceAll(f.mains["stream"], "lambdahttp.StartStreaming)", "lambdahttp.Start)")
		}, "StreamFunction: functions/stream does not start with lambdahttp.StartStreaming"},
		{"stream served by the HTTP API locally", "i_streaming_function_urls", func(f *codeFacts) {
			for i := range f.routes {
				f.routes[i].FunctionURL = false
			}
		}, "StreamFunction: streams, but infra/local does not mark it FunctionURL"},
		{"new stream route", "j_cloudfront_single_origin", func(f *codeFacts) {
			for i := range f.routes {
				if f.routes[i].FunctionURL {
					f.routes[i].Patterns = append(f.routes[i].Patterns, "GET /api/chats/{chatId}/events")
				}
			}
		}, "has no CloudFront cache behaviour with PathPattern /api/chats/*/events"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := *base
			f.mains = map[string]string{}
			for k, v := range base.mains {
				f.mains[k] = v
			}
			f.routes = slices.Clone(base.routes)
			for i := range f.routes {
				f.routes[i].Patterns = slices.Clone(f.routes[i].Patterns)
			}
			f.bedrockActions = slices.Clone(base.bedrockActions)
			tc.drift(&f)
			probs := byName[tc.check](s, &f)
			for _, p := range probs {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("check %s did not report %q; it reported %q", tc.check, tc.want, probs)
		})
	}
}

// TestPathPatterns pins the CloudFront path-pattern helpers.
func TestPathPatterns(t *testing.T) {
	t.Parallel()
	if got := cloudFrontPath("POST /api/chats/{chatId}/messages/stream"); got != "/api/chats/*/messages/stream" {
		t.Errorf("cloudFrontPath = %q", got)
	}
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"/api/chats/*/messages/stream", "/api/chats/x1/messages/stream", true},
		{"api/chats/*/messages/stream", "/api/chats/x1/messages/stream", true},
		{"/api/chats/*/messages/stream", "/api/chats/x1/messages", false},
		{"/api/chats/*", "/api/chats/x1/messages", true},
		{"/api/chats/?1", "/api/chats/x1", true},
		{"/API/chats/*", "/api/chats/x1", false},
	} {
		if got := pathPatternMatches(c.pattern, c.path); got != c.want {
			t.Errorf("pathPatternMatches(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}
