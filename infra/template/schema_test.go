package template_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/awslabs/goformation/v7/intrinsics"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The schema check validates template.yaml against the JSON schemas
// CloudFormation and SAM publish, vendored in testdata/schema (see its
// README): the SAM schema for the whole template (every
// AWS::Serverless::* resource and Globals), cfn-lint's schemas of the
// Parameters and Outputs sections and of a resource's attributes, and the
// CloudFormation resource provider schema of each other resource type for
// its Properties. It is what cfn-lint checks first, in Go, so that it runs
// wherever `go test` does.

const schemaDir = "testdata/schema"

// topLevelKeys are the sections a SAM template may have.
var topLevelKeys = []string{"AWSTemplateFormatVersion", "Transform", "Description", "Metadata", "Parameters",
	"Mappings", "Conditions", "Rules", "Resources", "Outputs", "Globals"}

// intrinsicNames are the intrinsic functions kept as {"Fn::X": args}
// objects in the tree validated against the SAM schema, which allows them
// where CloudFormation does.
var intrinsicNames = []string{"Ref", "Fn::GetAtt", "Fn::Sub", "Fn::If", "Fn::Not", "Fn::Equals", "Fn::And", "Fn::Or",
	"Fn::Select", "Fn::Split", "Fn::Join", "Fn::FindInMap", "Fn::Base64", "Fn::GetAZs", "Fn::ImportValue", "Fn::Cidr"}

var keepAllIntrinsics = func() *intrinsics.ProcessorOptions {
	o := &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{}}
	for _, name := range intrinsicNames {
		o.IntrinsicHandlerOverrides[name] = keepIntrinsic
	}
	return o
}()

// schemas are the compiled vendored schemas, by file name.
type schemas map[string]*jsonschema.Schema

var (
	schemasOnce sync.Once
	compiled    schemas
	compileErr  error
)

func loadSchemas(t *testing.T) schemas {
	t.Helper()
	schemasOnce.Do(func() {
		entries, err := os.ReadDir(schemaDir)
		if err != nil {
			compileErr = err
			return
		}
		c := jsonschema.NewCompiler()
		// cfn-lint's schemas name no draft; they are draft 7 with a few
		// later keywords (prefixItems, dependentRequired) that draft 7
		// ignores.
		c.DefaultDraft(jsonschema.Draft7)
		compiled = schemas{}
		for _, e := range entries {
			if filepath.Ext(e.Name()) != ".json" {
				continue
			}
			f, err := os.Open(filepath.Join(schemaDir, e.Name()))
			if err != nil {
				compileErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(f)
			f.Close()
			if err != nil {
				compileErr = fmt.Errorf("%s: %w", e.Name(), err)
				return
			}
			url := "file:///schema/" + e.Name()
			if err := c.AddResource(url, doc); err != nil {
				compileErr = err
				return
			}
			if compiled[e.Name()], err = c.Compile(url); err != nil {
				compileErr = fmt.Errorf("%s: %w", e.Name(), err)
				return
			}
		}
	})
	if compileErr != nil {
		t.Fatalf("vendored schemas: %v", compileErr)
	}
	return compiled
}

// schemaProblems validates the template data against the vendored schemas
// and returns what they reject.
func schemaProblems(t *testing.T, data []byte) []string {
	t.Helper()
	sc := loadSchemas(t)
	parseMu.Lock()
	js, err := intrinsics.ProcessYAML(data, keepAllIntrinsics)
	parseMu.Unlock()
	if err != nil {
		return []string{fmt.Sprintf("parse: %v", err)}
	}
	var tree map[string]any
	if err := json.Unmarshal(js, &tree); err != nil {
		return []string{fmt.Sprintf("parse: %v", err)}
	}
	var probs []string
	validate := func(where, file string, v any) {
		s, ok := sc[file]
		if !ok {
			probs = append(probs, fmt.Sprintf("%s: no vendored schema %s: add it to %s/vendor.sh", where, file, schemaDir))
			return
		}
		// The validator wants numbers as json.Number or float64, as its own
		// decoder gives them: round-trip the value through it.
		b, err := json.Marshal(v)
		if err == nil {
			v, err = jsonschema.UnmarshalJSON(bytes.NewReader(b))
		}
		if err == nil {
			err = s.Validate(v)
		}
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s against %s: %#v", where, file, err))
		}
	}

	for k := range tree {
		if !slices.Contains(topLevelKeys, k) {
			probs = append(probs, fmt.Sprintf("unknown top-level section %q", k))
		}
	}
	validate("template", "sam.schema.json", tree)
	if p, ok := tree["Parameters"]; ok {
		validate("Parameters", "cfn-parameters.json", p)
	}
	if o, ok := tree["Outputs"]; ok {
		validate("Outputs", "cfn-outputs.json", o)
	}
	// A !Ref of a Number parameter is a number (its Default, here), where
	// a schema may want an integer (a log group's RetentionInDays).
	numbers := map[string]any{}
	params, _ := tree["Parameters"].(map[string]any)
	for name, p := range params {
		if p, _ := p.(map[string]any); p["Type"] == "Number" {
			// Parameter values are strings in the schema: "30".
			if n, err := strconv.ParseFloat(fmt.Sprint(p["Default"]), 64); err == nil {
				numbers[name] = n
			}
		}
	}
	resources, _ := tree["Resources"].(map[string]any)
	for _, id := range sortedKeys(resources) {
		res, _ := resources[id].(map[string]any)
		typ, _ := res["Type"].(string)
		if strings.HasPrefix(typ, "AWS::Serverless::") {
			continue // the SAM schema's
		}
		validate("resource "+id, "cfn-resources.json", map[string]any{id: res})
		file := strings.ReplaceAll(typ, "::", "-") + ".json"
		props, ok := res["Properties"]
		if !ok {
			props = map[string]any{}
		}
		// Resource provider schemas know no intrinsics: validate the
		// properties as CloudFormation sees them with every condition true,
		// then with every condition false.
		for branch, cond := range []string{"conditions true", "conditions false"} {
			resolved, _ := resolveIntrinsics(withNumberDefaults(props, numbers), branch)
			validate(fmt.Sprintf("resource %s (%s) Properties, %s", id, typ, cond), file, resolved)
		}
	}
	return probs
}

// withNumberDefaults returns v with each {"Ref": name} of numbers (Number
// parameters by name) replaced by the parameter's Default.
func withNumberDefaults(v any, numbers map[string]any) any {
	switch v := v.(type) {
	case map[string]any:
		if name, ok := v["Ref"].(string); ok && len(v) == 1 {
			if d, ok := numbers[name]; ok {
				return d
			}
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = withNumberDefaults(x, numbers)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = withNumberDefaults(x, numbers)
		}
		return out
	default:
		return v
	}
}

// resolveIntrinsics returns v with each Fn::If replaced by its branch
// (0: the true one, 1: the false one), each value that is AWS::NoValue left
// out (false), the intrinsics that return lists (Fn::Split, Fn::GetAZs,
// Fn::Cidr) by a list of a placeholder, and every other intrinsic by a
// placeholder string, the type most intrinsics return: letters, digits
// and dashes, which the name patterns of resource schemas accept (a value
// known only at deployment cannot be checked against a pattern here;
// cfn-lint skips it too).
func resolveIntrinsics(v any, branch int) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 1 {
			for k, arg := range v {
				if k == "Fn::If" {
					if args, ok := arg.([]any); ok && len(args) == 3 {
						return resolveIntrinsics(args[1+branch], branch)
					}
				}
				if k == "Ref" && arg == "AWS::NoValue" {
					return nil, false
				}
				if k == "Fn::Split" || k == "Fn::GetAZs" || k == "Fn::Cidr" {
					return []any{"intrinsic-" + strings.ReplaceAll(k, "::", "-")}, true // these return lists
				}
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return "intrinsic-" + strings.ReplaceAll(k, "::", "-"), true
				}
			}
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			if r, keep := resolveIntrinsics(x, branch); keep {
				out[k] = r
			}
		}
		return out, true
	case []any:
		out := make([]any, 0, len(v))
		for _, x := range v {
			if r, keep := resolveIntrinsics(x, branch); keep {
				out = append(out, r)
			}
		}
		return out, true
	default:
		return v, true
	}
}

// TestTemplateSchema: template.yaml is valid against the CloudFormation and
// SAM schemas.
func TestTemplateSchema(t *testing.T) {
	t.Parallel()
	for _, p := range schemaProblems(t, loadTemplate(t)) {
		t.Error(p)
	}
}

// TestSchemaCatchesBrokenTemplates breaks template.yaml in memory, one way
// per case, and requires the schema check to reject it.
func TestSchemaCatchesBrokenTemplates(t *testing.T) {
	t.Parallel()
	src := string(loadTemplate(t))
	cases := []struct {
		name, old, new string
		want           string // a substring of one reported problem
	}{
		{"misspelt function property", "      CodeUri: .\n", "      CodeUrl: .\n", "CodeUrl"},
		{"misspelt HTTP API event property", "            Path: /api/liveness\n", "            Paths: /api/liveness\n", "Paths"},
		{"function URL auth type of the wrong type", "        AuthType: NONE\n", "        AuthType: [NONE]\n", "AuthType"},
		{"unknown section of a function resource", "  HealthFunction:\n    Type: AWS::Serverless::Function\n",
			"  HealthFunction:\n    Type: AWS::Serverless::Function\n    Propertys: {}\n", "Propertys"},
		{"unknown top-level section", "\nOutputs:\n", "\nOutput:\n", `"Output"`},
		{"misspelt parameter attribute", "    Default: ", "    Defualt: ", "Defualt"},
		{"output without a value", "    Value: !Ref UsersTable\n", "    Valeu: !Ref UsersTable\n", "Valeu"},
		{"misspelt table attribute", "    DeletionPolicy: Retain\n", "    DeletePolicy: Retain\n", "DeletePolicy"},
		{"DynamoDB attribute type outside its enum", "          AttributeType: S\n", "          AttributeType: STRING\n", "/AttributeDefinitions/0/AttributeType"},
		{"DynamoDB encryption flag of the wrong type", "        SSEEnabled: true\n", "        SSEEnabled: enabled\n", "SSEEnabled"},
		{"misspelt CloudFront property", "          TargetOriginId: HttpApi\n", "          TargetOrigin: HttpApi\n", "TargetOrigin"},
		{"CloudFront property of the wrong type", "        IPV6Enabled: true\n", "        IPV6Enabled: [true]\n", "IPV6Enabled"},
		{"CloudFront certificate branch broken", "          - CloudFrontDefaultCertificate: true\n", "          - CloudFrontDefaultCert: true\n", "CloudFrontDefaultCert"},
		{"resource type with no vendored schema", "    Type: AWS::DynamoDB::Table\n", "    Type: AWS::DynamoDB::GlobalTable\n", "AWS-DynamoDB-GlobalTable.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(src, tc.old) {
				t.Fatalf("template.yaml no longer contains %q: update this case", tc.old)
			}
			probs := schemaProblems(t, []byte(strings.Replace(src, tc.old, tc.new, 1)))
			for _, p := range probs {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("the schema check did not report %q; it reported %q", tc.want, probs)
		})
	}
}
