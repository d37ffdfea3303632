package toolclient_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/toolclient"
)

// EncodeValue writes the bytes json.Marshal writes, in a buffer of
// exactly their length.
func TestEncodeValueIsMarshalsJSONInOneExactBuffer(t *testing.T) {
	all := ""
	for c := range 0x80 {
		all += string(rune(c))
	}
	values := []any{
		nil, true, false, 0.0, 1.5, -2e-7, 1e21, 12345678901234567890.0, int64(7), json.Number("3.25"),
		"", "plain", all, "<a href=\"x\">&amp;</a>", "é ñ 漢字 🙂", "line\u2028para\u2029", "bad \xff\xfe utf-8 \xe2\x82",
		json.RawMessage(`{"raw":[1,2]}`),
		map[string]any{}, []any{}, map[string]any(nil), []any(nil),
		map[string]any{"z": 1.0, "a": []any{"x", nil, map[string]any{"<k>": "v\n", "b": false}}, "m": map[string]string{"s": "t"}},
		[]any{strings.Repeat("z", 100000), map[string]any{"result": strings.Repeat("\"\\", 1000)}},
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := toolclient.EncodeValue(v)
		if err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("EncodeValue(%#v) = %s, json.Marshal: %s", v, got, want)
		}
		if cap(got) != len(got) {
			t.Errorf("EncodeValue(%#v): cap %d, len %d: not one exact buffer", v, cap(got), len(got))
		}
	}
	if _, err := toolclient.EncodeValue(map[string]any{"f": func() {}}); err == nil {
		t.Error("a function encoded")
	}
}
