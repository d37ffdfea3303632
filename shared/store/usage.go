package store

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/usage"
)

// Usage stores the users' token usage in the Users table: one item per
// user and month, USAGE#<userId>#<YYYY-MM>, holding the month's committed
// tokens (`committed`: reserved for calls under way plus spent), the time
// of the last reservation (`reservedAt`, Unix seconds) and three
// number attributes per model (req_, in_ and out_ followed by the model id
// in hex, so that any model id is a plain attribute name). A reservation is
// one conditional UpdateItem of `committed` (a condition can compare one
// attribute, never a sum of the per-model ones: hence the counter of its
// own); a settle is one UpdateItem that moves `committed` and adds to the
// model's counters. It implements usage.Store.
type Usage struct {
	db    *dynamo.DB
	table dynamo.Table
	name  string
}

// NewUsage returns a Usage over the named Users table.
func NewUsage(db *dynamo.DB, usersTable string) *Usage {
	return &Usage{db: db, table: db.Table(usersTable), name: usersTable}
}

func usageKey(userID, month string) string { return "USAGE#" + userID + "#" + month }

// Usage attribute prefixes, and the committed counter.
const (
	usageRequests  = "req_"
	usageInput     = "in_"
	usageOutput    = "out_"
	usageCommitted = "committed"
	// usageReservedAt is when the month's last reservation was made (Unix
	// seconds).
	usageReservedAt = "reservedAt"
)

// Reserve adds tokens to userID's committed counter of month if it stays
// at most limit, and sets `reservedAt` to at (Unix seconds): one
// UpdateItem conditioned on `committed <= limit - tokens` (or, for the
// month's first call, on the item not existing). A refused write returns
// the item as it was (ReturnValuesOnConditionCheckFailure ALL_OLD), so the
// caller learns, without a read, the committed counter, what settled
// calls spent (the sum of the models' counters; the difference is what
// open reservations hold) and when the last reservation was made. An
// item written before the committed counter existed gets it once, from
// the sum of its models' tokens (one more conditional write), then the
// reservation is tried again.
func (u *Usage) Reserve(ctx context.Context, userID, month string, tokens, limit int64, at time.Time) (bool, usage.Counter, error) {
	const op = "store.ReserveUsage"
	for range 2 {
		ok, committed, item, err := u.reserve(ctx, userID, month, tokens, limit, at)
		if err != nil || ok {
			return ok, usage.Counter{Committed: committed}, storeError(op, err)
		}
		if item == nil {
			return false, usage.Counter{}, nil // no item yet, and tokens > limit
		}
		c := usage.Counter{Committed: committed}
		for _, m := range countsOf(item) {
			c.Spent += m.Tokens()
		}
		if n, ok := numberOf(item[usageReservedAt]); ok {
			c.ReservedAt = time.Unix(n, 0)
		}
		if _, has := item[usageCommitted]; has {
			return false, c, nil
		}
		// An item from before the counter: start it at what was spent.
		_, err = u.db.Client().UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(u.name),
			Key:                       map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: usageKey(userID, month)}},
			UpdateExpression:          aws.String("SET #c = :spent"),
			ConditionExpression:       aws.String("attribute_not_exists(#c)"),
			ExpressionAttributeNames:  map[string]string{"#c": usageCommitted},
			ExpressionAttributeValues: map[string]types.AttributeValue{":spent": number(c.Spent)},
		})
		if err != nil && !isConditionFailure(err) {
			return false, usage.Counter{}, storeError(op, err)
		}
	}
	return false, usage.Counter{}, storeError(op, errors.New("the committed counter could not be started"))
}

// reserve is one conditional write of Reserve: ok and the counter after,
// or the item as the refused write found it (nil when there is none).
func (u *Usage) reserve(ctx context.Context, userID, month string, tokens, limit int64, at time.Time) (bool, int64, map[string]types.AttributeValue, error) {
	cond := "#c <= :max"
	if tokens <= limit {
		cond += " OR attribute_not_exists(PK)"
	}
	out, err := u.db.Client().UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(u.name),
		Key:                                 map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: usageKey(userID, month)}},
		UpdateExpression:                    aws.String("ADD #c :t SET #r = :at"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            map[string]string{"#c": usageCommitted, "#r": usageReservedAt},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":t": number(tokens), ":max": number(limit - tokens), ":at": number(at.Unix())},
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		if len(failed.Item) == 0 {
			return false, 0, nil, nil
		}
		committed, _ := numberOf(failed.Item[usageCommitted])
		return false, committed, failed.Item, nil
	}
	if err != nil {
		return false, 0, nil, err
	}
	committed, _ := numberOf(out.Attributes[usageCommitted])
	return true, committed, nil, nil
}

// Settle adds delta to userID's committed counter of month and c to
// modelID's counters (none when modelID is empty), in one UpdateItem.
func (u *Usage) Settle(ctx context.Context, userID, month, modelID string, delta int64, c usage.Counts) error {
	up := u.table.Update("PK", usageKey(userID, month)).Add(usageCommitted, delta)
	if modelID != "" {
		m := hex.EncodeToString([]byte(modelID))
		up = up.Add(usageRequests+m, c.Requests).Add(usageInput+m, c.InputTokens).Add(usageOutput+m, c.OutputTokens)
	}
	return storeError("store.SettleUsage", up.Run(ctx))
}

// SettleReservation is Settle for a call whose reservation wrote the
// month's item: the same write, conditioned on the item existing. A
// settle that finds no item (the user's account was erased while the
// call was under way) writes nothing and succeeds, so a reply or run that
// outlived its account's erasure cannot write its usage back.
func (u *Usage) SettleReservation(ctx context.Context, userID, month, modelID string, delta int64, c usage.Counts) error {
	up := u.table.Update("PK", usageKey(userID, month)).Add(usageCommitted, delta).If("attribute_exists(PK)")
	if modelID != "" {
		m := hex.EncodeToString([]byte(modelID))
		up = up.Add(usageRequests+m, c.Requests).Add(usageInput+m, c.InputTokens).Add(usageOutput+m, c.OutputTokens)
	}
	if err := up.Run(ctx); err != nil && !isConditionFailure(err) {
		return storeError("store.SettleReservation", err)
	}
	return nil
}

// MonthUsage returns userID's counters of month per model (one read); an
// empty map when there are none.
func (u *Usage) MonthUsage(ctx context.Context, userID, month string) (map[string]usage.Counts, error) {
	const op = "store.MonthUsage"
	var item dynamo.Item
	err := u.table.Get("PK", usageKey(userID, month)).Consistent(true).One(ctx, &item)
	if errors.Is(err, dynamo.ErrNotFound) {
		return map[string]usage.Counts{}, nil
	}
	if err != nil {
		return nil, storeError(op, err)
	}
	return countsOf(item), nil
}

// Committed returns userID's committed tokens of month (one read): what
// reservations hold plus what settled calls spent; 0 when there is no
// item.
func (u *Usage) Committed(ctx context.Context, userID, month string) (int64, error) {
	var item dynamo.Item
	err := u.table.Get("PK", usageKey(userID, month)).Project(usageCommitted).Consistent(true).One(ctx, &item)
	if errors.Is(err, dynamo.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, storeError("store.Committed", err)
	}
	n, _ := numberOf(item[usageCommitted])
	return n, nil
}

// countsOf reads the per-model counters of a usage item.
func countsOf(item map[string]types.AttributeValue) map[string]usage.Counts {
	out := map[string]usage.Counts{}
	for name, av := range item {
		v, ok := numberOf(av)
		if !ok {
			continue
		}
		for _, p := range []string{usageRequests, usageInput, usageOutput} {
			id, found := strings.CutPrefix(name, p)
			if !found {
				continue
			}
			b, err := hex.DecodeString(id)
			if err != nil {
				break
			}
			c := out[string(b)]
			switch p {
			case usageRequests:
				c.Requests = v
			case usageInput:
				c.InputTokens = v
			case usageOutput:
				c.OutputTokens = v
			}
			out[string(b)] = c
			break
		}
	}
	return out
}

func number(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// numberOf returns av as an integer, if it is a number.
func numberOf(av types.AttributeValue) (int64, bool) {
	n, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	return v, err == nil
}
