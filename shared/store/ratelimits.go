package store

import (
	"context"
	"strconv"
	"time"

	"github.com/guregu/dynamo/v2"
)

// RateLimitTTLMargin is how long a rate-limit window's item outlives the
// window before DynamoDB's TTL may delete it. The margin is cosmetic: a
// window's count is never read after the window ends (the next window has
// another key), so a late or missing TTL deletion (the local engine records
// TTL but never enforces it) changes nothing.
const RateLimitTTLMargin = time.Minute

// RateLimits counts requests per user, rule and fixed time window in the
// RateLimits table, one item per window:
//
//	PK        RL#<userId>#<rule>#<window seconds>#<window start, epoch seconds>
//	hits      the window's count (a number, incremented atomically)
//	expiresAt the window's end plus RateLimitTTLMargin (epoch seconds; TTL)
//
// The window's length is part of the key because two windows of one rule
// (e.g. 30/m and 500/h) can start at the same second. It implements
// ratelimit.Counter.
type RateLimits struct {
	table dynamo.Table
}

// NewRateLimits returns a RateLimits over the named table.
func NewRateLimits(db *dynamo.DB, table string) *RateLimits {
	return &RateLimits{table: db.Table(table)}
}

type rateWindowItem struct {
	Hits int64 `dynamo:"hits"`
}

// rateWindowKey is the key of userID's window of rule that starts at start
// and lasts window.
func rateWindowKey(userID, rule string, start time.Time, window time.Duration) string {
	return "RL#" + userID + "#" + rule + "#" + strconv.FormatInt(int64(window/time.Second), 10) + "#" + strconv.FormatInt(start.Unix(), 10)
}

// Hit counts one request of userID under rule in the window that starts at
// start and lasts window, and returns the window's count including this
// request. It is one UpdateItem (ADD hits :1, SET expiresAt, ReturnValues
// UPDATED_NEW), atomic across concurrent callers: the item is created by
// the first hit of the window. Storage failures are classified as by every
// store call (Unavailable for throttling, Internal otherwise).
func (r *RateLimits) Hit(ctx context.Context, userID, rule string, start time.Time, window time.Duration) (int64, error) {
	const op = "store.RateLimits.Hit"
	expires := start.Add(window).Add(RateLimitTTLMargin).Unix()
	var it rateWindowItem
	err := r.table.Update("PK", rateWindowKey(userID, rule, start, window)).
		Add("hits", 1).
		Set("expiresAt", expires).
		OnlyUpdatedValue(ctx, &it)
	if err != nil {
		return 0, storeError(op, err)
	}
	return it.Hits, nil
}

// DeleteWindows deletes userID's counters of rule with windows of length
// per that may still exist at now (the windows whose TTL has not passed:
// those starting within per plus RateLimitTTLMargin before now, and one
// window more for the clocks of other instances), in one batch write. An
// account's erasure calls it for every rule.
func (r *RateLimits) DeleteWindows(ctx context.Context, userID, rule string, per time.Duration, now time.Time) error {
	const op = "store.RateLimits.DeleteWindows"
	if per <= 0 {
		return nil
	}
	secs := int64(per / time.Second)
	start := now.Unix() - now.Unix()%secs
	var keys []dynamo.Keyed
	for s := start; s > now.Unix()-secs-int64(RateLimitTTLMargin/time.Second)-secs; s -= secs {
		keys = append(keys, dynamo.Keys{rateWindowKey(userID, rule, time.Unix(s, 0), per)})
	}
	return hashBatchDelete(ctx, op, r.table, keys)
}
