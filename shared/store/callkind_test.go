package store_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/workflowchat/service/shared/store"
)

// TestCallKind names calls by operation and the kinds of item they touch,
// from the items' keys.
func TestCallKind(t *testing.T) {
	t.Parallel()
	key := func(pk, sk string) map[string]types.AttributeValue {
		k := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}}
		if sk != "" {
			k["SK"] = &types.AttributeValueMemberS{Value: sk}
		}
		return k
	}
	const id = "0b7c7c8e-3f57-4c2e-9a55-5d7c9d3f0a11"
	for _, tc := range []struct {
		op     string
		params any
		want   string
	}{
		{"PutItem", &dynamodb.PutItemInput{Item: key("CHAT#c", "STREAM#"+id+"#000000000007")}, "PutItem log batch"},
		{"UpdateItem", &dynamodb.UpdateItemInput{Key: key("CHAT#c", "STREAM#"+id+"#~")}, "UpdateItem log head"},
		{"UpdateItem", &dynamodb.UpdateItemInput{Key: key("RL#u#streams#60#0", "")}, "UpdateItem RL"},
		{"GetItem", &dynamodb.GetItemInput{Key: key("3a8b3194", "")}, "GetItem unprefixed"},
		{"PutItem", &dynamodb.PutItemInput{Item: key("TERM#u#word", id+"#"+id)}, "PutItem TERM"},
		{"Query", &dynamodb.QueryInput{IndexName: aws.String("GSI1")}, "Query GSI1"},
		{"Query", &dynamodb.QueryInput{}, "Query"},
		{"TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{Item: key("CHAT#c", "MSG#2026#m1")}},
			{Put: &types.Put{Item: key("CHAT#c", "MSG#2026#m2")}},
			{Update: &types.Update{Key: key("CHAT#c", "CHAT")}},
			{ConditionCheck: &types.ConditionCheck{Key: key("CHAT#c", "STREAM#"+id+"#~")}},
		}}, "TransactWriteItems CHAT+MSG+log head"},
		{"DescribeTable", &dynamodb.DescribeTableInput{}, "DescribeTable"},
	} {
		if got := store.CallKind(tc.op, tc.params); got != tc.want {
			t.Errorf("CallKind(%s, %T) = %q, want %q", tc.op, tc.params, got, tc.want)
		}
	}
}
