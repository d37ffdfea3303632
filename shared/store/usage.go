package store

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/usage"
)

// Usage stores the users' token usage in the Users table: one item per
// user and month, USAGE#<userId>#<YYYY-MM>, with three number attributes
// per model (req_, in_ and out_ followed by the model id in hex, so that
// any model id is a plain attribute name). A model call adds to them with
// one UpdateItem ADD, or rides as that update in the transaction that
// stores its reply. It implements usage.Store.
type Usage struct {
	table dynamo.Table
}

// NewUsage returns a Usage over the named Users table.
func NewUsage(db *dynamo.DB, usersTable string) *Usage {
	return &Usage{table: db.Table(usersTable)}
}

func usageKey(userID, month string) string { return "USAGE#" + userID + "#" + month }

// Usage attribute prefixes.
const (
	usageRequests = "req_"
	usageInput    = "in_"
	usageOutput   = "out_"
)

// usageUpdate is the atomic addition of c to userID's counters of modelID
// in month.
func usageUpdate(table dynamo.Table, userID, month, modelID string, c usage.Counts) *dynamo.Update {
	m := hex.EncodeToString([]byte(modelID))
	return table.Update("PK", usageKey(userID, month)).
		Add(usageRequests+m, c.Requests).
		Add(usageInput+m, c.InputTokens).
		Add(usageOutput+m, c.OutputTokens)
}

// AddUsage adds c to userID's counters of modelID in month, atomically.
func (u *Usage) AddUsage(ctx context.Context, userID, month, modelID string, c usage.Counts) error {
	return storeError("store.AddUsage", usageUpdate(u.table, userID, month, modelID, c).Run(ctx))
}

// MonthUsage returns userID's counters of month per model (one read); an
// empty map when there are none.
func (u *Usage) MonthUsage(ctx context.Context, userID, month string) (map[string]usage.Counts, error) {
	const op = "store.MonthUsage"
	var item dynamo.Item
	err := u.table.Get("PK", usageKey(userID, month)).Consistent(true).One(ctx, &item)
	out := map[string]usage.Counts{}
	if errors.Is(err, dynamo.ErrNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, storeError(op, err)
	}
	for name, av := range item {
		n, ok := av.(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return nil, storeError(op, err)
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
	return out, nil
}
