package dynamolocal_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/workflowchat/service/infra/dynamolocal"
)

func TestRewriteKeyConditions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    string // expected JSON (compared semantically); "" means unchanged input
		wantErr string // substring of the error
	}{
		{
			name: "hash only",
			in:   `{"TableName":"t","KeyConditions":{"Chat":{"ComparisonOperator":"EQ","AttributeValueList":[{"S":"c1"}]}}}`,
			want: `{"TableName":"t","KeyConditionExpression":"#kc0 = :kc0",
				"ExpressionAttributeNames":{"#kc0":"Chat"},"ExpressionAttributeValues":{":kc0":{"S":"c1"}}}`,
		},
		{
			name: "placeholders skip existing names and values, maps merged",
			in: `{"TableName":"t","FilterExpression":"#sX = :v0 AND #kc0 > :kc0 AND :kc1 <> #sX",
				"ExpressionAttributeNames":{"#sX":"Text","#kc0":"Other"},
				"ExpressionAttributeValues":{":v0":{"S":"hi"},":kc0":{"N":"1"},":kc1":{"N":"2"}},
				"KeyConditions":{
					"Seq":{"ComparisonOperator":"BETWEEN","AttributeValueList":[{"N":"2"},{"N":"10"}]},
					"Chat":{"ComparisonOperator":"EQ","AttributeValueList":[{"S":"c1"}]}}}`,
			want: `{"TableName":"t","FilterExpression":"#sX = :v0 AND #kc0 > :kc0 AND :kc1 <> #sX",
				"KeyConditionExpression":"#kc1 = :kc2 AND #kc2 BETWEEN :kc3 AND :kc4",
				"ExpressionAttributeNames":{"#sX":"Text","#kc0":"Other","#kc1":"Chat","#kc2":"Seq"},
				"ExpressionAttributeValues":{":v0":{"S":"hi"},":kc0":{"N":"1"},":kc1":{"N":"2"},
					":kc2":{"S":"c1"},":kc3":{"N":"2"},":kc4":{"N":"10"}}}`,
		},
		{name: "LT", in: rangeCond("LT", `{"N":"5"}`), want: rangeWant("#kc1 < :kc1", `{"N":"5"}`)},
		{name: "LE", in: rangeCond("LE", `{"N":"5"}`), want: rangeWant("#kc1 <= :kc1", `{"N":"5"}`)},
		{name: "GT", in: rangeCond("GT", `{"N":"5"}`), want: rangeWant("#kc1 > :kc1", `{"N":"5"}`)},
		{name: "GE", in: rangeCond("GE", `{"N":"5"}`), want: rangeWant("#kc1 >= :kc1", `{"N":"5"}`)},
		{name: "EQ", in: rangeCond("EQ", `{"N":"5"}`), want: rangeWant("#kc1 = :kc1", `{"N":"5"}`)},
		{name: "BEGINS_WITH", in: rangeCond("BEGINS_WITH", `{"S":"ab"}`), want: rangeWant("begins_with(#kc1, :kc1)", `{"S":"ab"}`)},
		{name: "BETWEEN", in: rangeCond("BETWEEN", `{"N":"1"},{"N":"9"}`), want: rangeWant("#kc1 BETWEEN :kc1 AND :kc2", `{"N":"1"}`, `{"N":"9"}`)},
		{name: "no KeyConditions is unchanged", in: `{"TableName":"t","KeyConditionExpression":"pk = :p","ExpressionAttributeValues":{":p":{"S":"x"}}}`},
		{name: "NE is not a key operator", in: rangeCond("NE", `{"N":"5"}`), wantErr: "ValidationException"},
		{name: "BETWEEN needs two values", in: rangeCond("BETWEEN", `{"N":"5"}`), wantErr: "Invalid number of argument"},
		{name: "EQ needs one value", in: rangeCond("EQ", `{"N":"5"},{"N":"6"}`), wantErr: "Invalid number of argument"},
		{
			name:    "three conditions",
			in:      `{"KeyConditions":{"a":{"ComparisonOperator":"EQ","AttributeValueList":[{"S":"1"}]},"b":{"ComparisonOperator":"EQ","AttributeValueList":[{"S":"1"}]},"c":{"ComparisonOperator":"EQ","AttributeValueList":[{"S":"1"}]}}}`,
			wantErr: "length 1 or 2",
		},
		{name: "empty conditions", in: `{"KeyConditions":{}}`, wantErr: "length 1 or 2"},
		{
			name:    "both legacy and expression",
			in:      `{"KeyConditionExpression":"a = :a","KeyConditions":{"a":{"ComparisonOperator":"EQ","AttributeValueList":[{"S":"1"}]}}}`,
			wantErr: "Can not use both",
		},
		{name: "malformed JSON", in: `{"KeyConditions":`, wantErr: "SerializationException"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := dynamolocal.RewriteKeyConditions([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q (output %s)", err, tc.wantErr, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if !jsonEqual(t, got, []byte(want)) {
				t.Fatalf("rewrite mismatch\n got: %s\nwant: %s", got, want)
			}
			if strings.Contains(string(got), "KeyConditions\"") {
				t.Fatalf("KeyConditions still present: %s", got)
			}
		})
	}
}

func rangeCond(op, values string) string {
	return `{"TableName":"t","KeyConditions":{"Chat":{"ComparisonOperator":"EQ","AttributeValueList":[{"S":"c1"}]},` +
		`"Seq":{"ComparisonOperator":"` + op + `","AttributeValueList":[` + values + `]}}}`
}

func rangeWant(rangeExpr string, values ...string) string {
	vals := `":kc0":{"S":"c1"}`
	for i, v := range values {
		vals += `,":kc` + string(rune('1'+i)) + `":` + v
	}
	return `{"TableName":"t","KeyConditionExpression":"#kc0 = :kc0 AND ` + rangeExpr + `",` +
		`"ExpressionAttributeNames":{"#kc0":"Chat","#kc1":"Seq"},"ExpressionAttributeValues":{` + vals + `}}`
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("decode %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}
