package store

import (
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CallKind names a DynamoDB call by its operation and the kinds of item
// it touches, as the CapacityMeter tallies it (ByKind): "PutItem log
// batch", "UpdateItem log head", "TransactWriteItems log batch+log head",
// "Query" with the index it reads. An item's kind comes from its key (the
// key layouts of tables.go): "log head" and "log batch" for the event
// logs, else the first segment of its sort key (MSG, CHAT, RUN, ...) or,
// in a table with no sort key, of its partition key (RL, USAGE, ...;
// "unprefixed" for a key with no kind prefix, as a session's).
func CallKind(op string, params any) string {
	var kinds []string
	add := func(key map[string]types.AttributeValue) {
		if k := itemKind(key); !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		add(in.Item)
	case *dynamodb.UpdateItemInput:
		add(in.Key)
	case *dynamodb.DeleteItemInput:
		add(in.Key)
	case *dynamodb.GetItemInput:
		add(in.Key)
	case *dynamodb.QueryInput:
		if in.IndexName != nil {
			return op + " " + *in.IndexName
		}
		return op
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				add(it.Put.Item)
			case it.Update != nil:
				add(it.Update.Key)
			case it.Delete != nil:
				add(it.Delete.Key)
			case it.ConditionCheck != nil:
				add(it.ConditionCheck.Key)
			}
		}
	case *dynamodb.BatchWriteItemInput:
		for _, reqs := range in.RequestItems {
			for _, r := range reqs {
				switch {
				case r.PutRequest != nil:
					add(r.PutRequest.Item)
				case r.DeleteRequest != nil:
					add(r.DeleteRequest.Key)
				}
			}
		}
	}
	slices.Sort(kinds)
	if len(kinds) == 0 {
		return op
	}
	return op + " " + strings.Join(kinds, "+")
}

// itemKind is the kind of the item with key (see CallKind).
func itemKind(key map[string]types.AttributeValue) string {
	str := func(name string) string {
		if v, ok := key[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	sk := str("SK")
	switch {
	case strings.HasPrefix(str("PK"), "TERM#"):
		return "TERM" // a search posting (its sort key a rank and a chat's and a message's ids) or a word's count
	case strings.HasPrefix(sk, logPrefix) && strings.HasSuffix(sk, "#"+logHeadSuffix):
		return "log head"
	case strings.HasPrefix(sk, logPrefix):
		return "log batch"
	case sk != "":
		k, _, _ := strings.Cut(sk, "#")
		return k
	}
	k, _, ok := strings.Cut(str("PK"), "#")
	if !ok {
		return "unprefixed" // a key of its own (a session's hash)
	}
	return k
}
