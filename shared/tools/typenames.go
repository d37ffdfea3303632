package tools

import (
	"errors"
	"github.com/workflowchat/service/shared/schema"
	"regexp"
	"strings"

	"github.com/expr-lang/expr/file"
)

// A tool's error message is for the user or the model that called it, who
// know JSON's types (object, array, string, number, boolean, null), not the
// Go types our libraries name in theirs: expr says "float64" and
// "map[string]interface {}", text/template "[]interface {}". The functions
// below rewrite those names in the parts of a message the library wrote,
// never in the parts that quote the user's own text.

// goTypeName matches the Go type names that stand for JSON types wherever
// they occur, and the bare scalar type names after a word that announces a
// type (so that a user's variable named "int" stays as it is).
var goTypeName = regexp.MustCompile(`(map\[string\](?:interface \{\}|any)|\[\](?:interface \{\}|any)|slice/array|interface \{\}|float64|float32|<nil>)|\b(type|types|got|expected|and|of) (int|int64|int32|uint|uint64|uint8|bool)\b`)

// jsonTypeOf names the JSON type of the Go type name t.
func jsonTypeOf(t string) string {
	switch t {
	case "map[string]interface {}", "map[string]any":
		return "object"
	case "[]interface {}", "[]any", "slice/array":
		return "array"
	case "interface {}":
		return "value"
	case "float64", "float32", "int", "int64", "int32", "uint", "uint64", "uint8":
		return "number"
	case "bool":
		return "boolean"
	case "<nil>", "nil":
		return "null"
	}
	return t
}

// jsonTypeOfValue names the JSON type of a decoded value.
func jsonTypeOfValue(v any) string { return schema.TypeOf(v) }

// jsonTypeNames rewrites the Go type names in msg as JSON type names. A
// name that is part of a longer word, follows a '.' or '$' (a field or a
// variable of the user's) or is quoted (a key of the user's) is kept.
func jsonTypeNames(msg string) string {
	var b strings.Builder
	last := 0
	for _, m := range goTypeName.FindAllStringSubmatchIndex(msg, -1) {
		start, end := m[0], m[1]
		if start > 0 && wordByte(msg[start-1]) || end < len(msg) && wordByte(msg[end]) {
			continue
		}
		b.WriteString(msg[last:start])
		if m[2] >= 0 { // a composite or float name
			b.WriteString(jsonTypeOf(msg[m[2]:m[3]]))
		} else { // a word announcing a type, and a scalar name
			b.WriteString(msg[m[4]:m[5]] + " " + jsonTypeOf(msg[m[6]:m[7]]))
		}
		last = end
	}
	b.WriteString(msg[last:])
	return b.String()
}

func wordByte(c byte) bool {
	return c == '_' || c == '.' || c == '$' || c == '"' || c == '\'' || c == '`' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// exprCast matches the message of expr's run-time conversion of an
// expression's value to a number.
var exprCast = regexp.MustCompile(`^invalid operation: float\((.+)\)$`)

// exprMessage is the message of an expr error with JSON type names: of the
// error's own text only, not of the snippet of the expression it quotes.
func exprMessage(err error) string {
	var fe *file.Error
	if !errors.As(err, &fe) {
		return jsonTypeNames(err.Error())
	}
	c := *fe
	if m := exprCast.FindStringSubmatch(c.Message); m != nil {
		c.Message = "the expression's value is " + withArticle(jsonTypeOf(m[1])) + ", not a number"
	} else {
		c.Message = jsonTypeNames(c.Message)
	}
	return c.Error()
}

// withArticle puts "a" or "an" before a JSON type name ("null" takes none).
func withArticle(t string) string {
	switch {
	case t == "null":
		return t
	case strings.IndexByte("aeiou", t[0]) >= 0:
		return "an " + t
	}
	return "a " + t
}

// templateError matches an error of text/template about the template we
// name "template": line, optional column, the action it was executing
// (quoted from the user's template) and the message.
var templateError = regexp.MustCompile(`(?s)^template: template:(\d+)(?::(\d+))?: (?:executing "template" at <(.*?)>: )?(.*)$`)

// templateMessage is the message of a text/template error for the user:
// the position in their template and the action, then the message with
// JSON type names, without the library's name for the template.
func templateMessage(err error) string {
	msg := err.Error()
	m := templateError.FindStringSubmatch(msg)
	if m == nil {
		return jsonTypeNames(msg)
	}
	pos := "line " + m[1]
	if m[2] != "" {
		pos += ", column " + m[2]
	}
	if action := m[3]; action != "" {
		if !strings.HasPrefix(action, "{{") {
			action = "{{" + action + "}}"
		}
		pos += ", at " + action
	}
	return pos + ": " + templateDetail(m[4])
}

// fieldOfNonObject matches text/template's messages for a field of a
// value that is not an object.
var (
	fieldOfNonObject = regexp.MustCompile(`^can't evaluate field (\S+) in type interface \{\}$`)
	fieldOfNull      = regexp.MustCompile(`^nil pointer evaluating interface \{\}\.(\S+)$`)
)

func templateDetail(msg string) string {
	if m := fieldOfNonObject.FindStringSubmatch(msg); m != nil {
		return "can't evaluate field " + m[1] + ": the value is not an object"
	}
	if m := fieldOfNull.FindStringSubmatch(msg); m != nil {
		return "can't evaluate field " + m[1] + " of null"
	}
	return jsonTypeNames(msg)
}
