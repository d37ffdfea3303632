package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/ratelimit"
	"github.com/workflowchat/service/shared/usage"
)

// The struct tags of the concern structs. env (the variable) and
// envDefault (its default) are caarlos0/env's; Load reads the others
// before and after env parses:
const (
	// tagLocalDefault is a variable's default outside Lambda
	// (AWS_LAMBDA_FUNCTION_NAME unset). In Lambda it has envDefault, if
	// any.
	tagLocalDefault = "envLocalDefault"
	// tagTrimRight holds the characters dropped from the end of the value
	// (of each element of a list) before it is parsed: the trailing
	// slashes of URLs.
	tagTrimRight = "envTrimRight"
	// tagRule is the Name of a ratelimit.Rule: its counters' key.
	tagRule = "rule"
)

// field is one variable of a concern struct, as its tags declare it.
type field struct {
	name     string // the variable (env tag)
	goName   string // the Go field's name, which env.ParseError reports
	index    []int  // the field's index path in Config
	def      string // envDefault
	hasDef   bool
	local    string // tagLocalDefault
	hasLocal bool
	trim     string // tagTrimRight
	list     bool   // a []string: trim applies to each element
	rule     string // tagRule
}

// fields lists the variables of Config's concern structs (its embedded
// structs), in declaration order.
func fields() []field { return tagged().list }

// tagged walks Config's type once.
var tagged = sync.OnceValue(func() (t struct {
	list     []field
	byGoName map[string]field
}) {
	var out []field
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			idx := append(index[:len(index):len(index)], i)
			if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
				walk(sf.Type, idx)
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("env"), ",")
			if name == "" || name == "-" {
				continue
			}
			def, hasDef := sf.Tag.Lookup("envDefault")
			local, hasLocal := sf.Tag.Lookup(tagLocalDefault)
			out = append(out, field{name: name, goName: sf.Name, index: idx, def: def, hasDef: hasDef, local: local, hasLocal: hasLocal,
				trim: sf.Tag.Get(tagTrimRight), list: sf.Type == reflect.TypeFor[[]string](), rule: sf.Tag.Get(tagRule)})
		}
	}
	walk(reflect.TypeFor[Config](), nil)
	t.list, t.byGoName = out, make(map[string]field, len(out))
	for _, f := range out {
		t.byGoName[f.goName] = f
	}
	return t
})

// environ reads every variable from getenv. raw holds the values as set
// (spaces trimmed), for Require; vals the values env parses: tagTrimRight
// applied, tagLocalDefault filled in outside Lambda, and empty ones left
// out, so that envDefault applies to them.
func environ(getenv func(string) string) (raw, vals map[string]string) {
	raw, vals = make(map[string]string, len(fields())), make(map[string]string, len(fields()))
	inLambda := strings.TrimSpace(getenv(functionNameVar)) != ""
	for _, f := range fields() {
		v := strings.TrimSpace(getenv(f.name))
		raw[f.name] = v
		if f.trim != "" {
			v = trimRight(v, f.trim, f.list)
		}
		if v == "" && f.hasLocal && !inLambda {
			v = f.local
		}
		if v != "" {
			vals[f.name] = v
		}
	}
	// slog's text form of a level has no "warning", which LOG_LEVEL has
	// always taken for warn.
	if strings.EqualFold(vals[logLevelVar], "warning") {
		vals[logLevelVar] = "warn"
	}
	return raw, vals
}

// trimRight drops cutset's characters from the end of v, or of each
// comma-separated element of v when list.
func trimRight(v, cutset string, list bool) string {
	if !list {
		return strings.TrimRight(v, cutset)
	}
	parts := strings.Split(v, ",")
	for i, p := range parts {
		parts[i] = strings.TrimRight(strings.TrimSpace(p), cutset)
	}
	return strings.Join(parts, ",")
}

// load fills c's concern structs from vals (see environ) and checks them
// with c.Validate. It returns an error per bad variable: the parser's
// when its value does not parse, else Validate's.
func load(c *Config, vals map[string]string) []error {
	var errs []error
	unparsed := map[string]bool{}
	for _, e := range flatten(env.ParseWithOptions(c, env.Options{Environment: vals, FuncMap: parsers})) {
		var pe env.ParseError
		var f field
		if errors.As(e, &pe) {
			f = tagged().byGoName[pe.Name]
		}
		if f.name == "" {
			errs = append(errs, fmt.Errorf("config: %w", e)) // a tag env does not support: a bug here
			continue
		}
		msg := pe.Err.Error()
		if pe.Type == reflect.TypeFor[slog.Level]() {
			// slog.Level parses itself (an encoding.TextUnmarshaler
			// comes before any FuncMap parser).
			msg = fmt.Sprintf(logLevelMustBe, strings.ToLower(vals[f.name]))
		}
		unparsed[f.name] = true
		errs = append(errs, &varError{f.name, msg})
	}
	c.InLambda = c.FunctionName != ""
	rv := reflect.ValueOf(c).Elem()
	for _, f := range fields() {
		if f.rule != "" {
			rv.FieldByIndex(f.index).Addr().Interface().(*ratelimit.Rule).Name = f.rule
		}
	}
	for _, e := range flatten(c.Validate()) {
		if ve := (*varError)(nil); errors.As(e, &ve) && unparsed[ve.name] {
			continue // its zero value, not what was set
		}
		errs = append(errs, e)
	}
	return errs
}

// flatten lists the errors err joins (errors.Join, env.AggregateError).
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// varError is a bad value of one variable.
type varError struct{ name, msg string }

func (e *varError) Error() string { return "config: " + e.name + ": " + e.msg }

// problems collects a concern's bad variables in its Validate.
type problems []error

func (p *problems) add(name, format string, args ...any) {
	*p = append(*p, &varError{name, fmt.Sprintf(format, args...)})
}

// err joins the problems; nil when there are none.
func (p problems) err() error { return errors.Join(p...) }

// httpURL adds a problem unless v is empty or an http(s) URL.
func (p *problems) httpURL(name, v string) {
	if v != "" && !isHTTPURL(v) {
		p.add(name, "must be an http(s) URL, got %q", v)
	}
}

// durationIn adds a problem unless lo <= d <= hi.
func (p *problems) durationIn(name string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		p.add(name, "must be a Go duration from %s to %s, got %q", lo, hi, d)
	}
}

func isHTTPURL(v string) bool {
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// parsers are the one way each type of variable is parsed. Every error
// says what the value must be and quotes it; load prefixes the variable.
// A concern's Validate checks the ranges.
var parsers = map[reflect.Type]env.ParserFunc{
	reflect.TypeFor[bool](): func(v string) (any, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("must be a boolean (true or false), got %q", v)
		}
		return b, nil
	},
	reflect.TypeFor[int](): func(v string) (any, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("must be an integer, got %q", v)
		}
		return n, nil
	},
	reflect.TypeFor[int64](): func(v string) (any, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("must be an integer, got %q", v)
		}
		return n, nil
	},
	reflect.TypeFor[time.Duration](): func(v string) (any, error) {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("must be a Go duration like 30s or 1m30s, got %q", v)
		}
		return d, nil
	},
	// A list is comma separated; blanks are dropped.
	reflect.TypeFor[[]string](): func(v string) (any, error) {
		var out []string
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out, nil
	},
	reflect.TypeFor[logging.Format](): func(v string) (any, error) {
		switch f := logging.Format(strings.ToLower(v)); f {
		case logging.JSON, logging.Text:
			return f, nil
		}
		return nil, fmt.Errorf(logFormatMustBe, strings.ToLower(v))
	},
	// load names the rule (tagRule).
	reflect.TypeFor[ratelimit.Rule](): func(v string) (any, error) {
		return ratelimit.Parse("", v)
	},
	reflect.TypeFor[map[string]usage.Price](): func(v string) (any, error) {
		var prices map[string]usage.Price
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&prices); err != nil {
			return nil, fmt.Errorf(`must be a JSON object like {"gpt-4o": {"input": 2.5, "output": 10}} (USD per million tokens): %v`, err)
		}
		return prices, nil
	},
}
