package config

import (
	"reflect"

	"github.com/workflowchat/service/shared/ratelimit"
)

// RateLimitRules returns every enabled rate limit rule of c (the fields
// tagged with a rule name), in declaration order: what an account's
// erasure clears the counters of.
func (c Config) RateLimitRules() []ratelimit.Rule {
	v := reflect.ValueOf(c)
	var out []ratelimit.Rule
	for _, f := range fields() {
		if f.rule == "" {
			continue
		}
		if r, ok := v.FieldByIndex(f.index).Interface().(ratelimit.Rule); ok && r.Enabled() {
			out = append(out, r)
		}
	}
	return out
}
