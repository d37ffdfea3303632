package config_test

import (
	"github.com/workflowchat/service/shared/tracing/otlp"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/config"
)

// TestVariables: each variable is one field (the parse errors of
// caarlos0/env name the Go field, which Load maps back to its variable),
// and each rate-limit rule has its name.
func TestVariables(t *testing.T) {
	t.Parallel()
	names, goNames := map[string]bool{}, map[string]bool{}
	for _, v := range config.Variables() {
		if names[v.Name] || goNames[v.GoName] {
			t.Errorf("%s (%s): declared twice", v.Name, v.GoName)
		}
		names[v.Name], goNames[v.GoName] = true, true
		if strings.HasPrefix(v.Name, "RATE_LIMIT_") && v.Rule == "" {
			t.Errorf("%s: no rule tag (the rule's name, its counters' key)", v.Name)
		}
	}
	// Every exported field of Config's concern structs is a variable,
	// but InLambda.
	tagged := 0
	ct := reflect.TypeFor[config.Config]()
	for i := range ct.NumField() {
		concern := ct.Field(i)
		if !concern.IsExported() {
			continue
		}
		if !concern.Anonymous || concern.Type.Kind() != reflect.Struct {
			t.Errorf("Config.%s: not an embedded concern struct", concern.Name)
			continue
		}
		for j := range concern.Type.NumField() {
			f := concern.Type.Field(j)
			switch tag := f.Tag.Get("env"); {
			case tag == "-" && f.Name == "InLambda":
			case tag == "" || tag == "-":
				t.Errorf("%s.%s: no env tag", concern.Name, f.Name)
			default:
				tagged++
				if !names[tag] {
					t.Errorf("%s.%s: Load does not read %s", concern.Name, f.Name, tag)
				}
			}
		}
	}
	if tagged != len(names) {
		t.Errorf("%d tagged fields, %d variables", tagged, len(names))
	}
}

// TestDefaultConstants: the exported defaults are the tags' defaults.
func TestDefaultConstants(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"SANDBOX_PER_USER":               strconv.Itoa(config.DefaultSandboxPerUser),
		"USER_STORAGE_QUOTA":             strconv.Itoa(config.DefaultUserStorageQuota),
		"RATE_LIMIT_MESSAGES":            config.DefaultRateLimitMessages,
		"RATE_LIMIT_STREAMS":             config.DefaultRateLimitStreams,
		"RATE_LIMIT_RUNS":                config.DefaultRateLimitRuns,
		"RATE_LIMIT_RESUMES":             config.DefaultRateLimitResumes,
		"RATE_LIMIT_MCP":                 config.DefaultRateLimitMCP,
		"RATE_LIMIT_ATTACHMENTS":         config.DefaultRateLimitAttachments,
		"RATE_LIMIT_SEARCH":              config.DefaultRateLimitSearch,
		"RATE_LIMIT_KNOWLEDGE_DOCUMENTS": config.DefaultRateLimitKnowledgeDocuments,
		"RATE_LIMIT_SIGN_IN_EMAIL":       config.DefaultRateLimitSignInEmail,
		"RATE_LIMIT_SIGN_IN_ADDRESS":     config.DefaultRateLimitSignInAddress,
		"RATE_LIMIT_SIGN_UP_ADDRESS":     config.DefaultRateLimitSignUpAddress,
		"RATE_LIMIT_OAUTH_TOKEN":         config.DefaultRateLimitOAuthToken,
		"RATE_LIMIT_OAUTH_REGISTER":      config.DefaultRateLimitOAuthRegister,
		"RATE_LIMIT_OAUTH_DOCUMENT":      config.DefaultRateLimitOAuthDocument,
	}
	for _, v := range config.Variables() {
		if w, ok := want[v.Name]; ok {
			if !v.HasDefault || v.Default != w {
				t.Errorf("%s: envDefault %q, the constant says %q", v.Name, v.Default, w)
			}
			delete(want, v.Name)
		}
	}
	for name := range want {
		t.Errorf("%s: no such variable", name)
	}
}

// configDoc is the page that lists every variable.
const configDoc = "docs/configuration.md"

// TestDocListsEveryVariable: docs/configuration.md's table (the page up
// to its first "## " section) has a row for every variable Load reads and
// none for another, and each default the code declares (envDefault,
// envLocalDefault) is in its row's default column, in backquotes.
func TestDocListsEveryVariable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../" + configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.HasPrefix(doc, "# Configuration\n") {
		t.Fatalf("%s does not start with its title, # Configuration", configDoc)
	}
	section := doc
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	defaults := map[string]string{} // variable -> its row's default column
	name := regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			if _, dup := defaults[m[1]]; dup {
				t.Errorf("%s: %s has two rows", configDoc, m[1])
			}
			defaults[m[1]] = cells[2]
		}
	}
	for _, v := range config.Variables() {
		col, ok := defaults[v.Name]
		if !ok {
			t.Errorf("%s's table has no row for %s", configDoc, v.Name)
			continue
		}
		delete(defaults, v.Name)
		if v.HasDefault && !strings.Contains(col, "`"+v.Default+"`") {
			t.Errorf("%s: %s's default column %q does not say `%s`", configDoc, v.Name, strings.TrimSpace(col), v.Default)
		}
		if v.HasLocalDefault && !strings.Contains(col, "`"+v.LocalDefault+"`") {
			t.Errorf("%s: %s's default column %q does not say `%s` (locally)", configDoc, v.Name, strings.TrimSpace(col), v.LocalDefault)
		}
	}
	// The OpenTelemetry exporter reads its own variables under the
	// specification's names (shared/tracing/otlp); the table may list
	// those it really reads.
	for n := range otlpVariables(t) {
		delete(defaults, n)
	}
	for n := range defaults {
		t.Errorf("%s lists %s, which neither config.Load nor the OTLP exporter reads", configDoc, n)
	}
}

// otlpVariables returns the names otlp.ReadSettings reads when tracing is
// on, recorded from its getenv.
func otlpVariables(t *testing.T) map[string]bool {
	t.Helper()
	read := map[string]bool{}
	_, ok, err := otlp.ReadSettings(func(n string) string {
		read[n] = true
		if n == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return "http://localhost:4318"
		}
		return ""
	}, "")
	if err != nil || !ok {
		t.Fatalf("otlp.ReadSettings with an endpoint: on %v, %v", ok, err)
	}
	return read
}
