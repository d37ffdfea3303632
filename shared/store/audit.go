package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/audit"
	"github.com/workflowchat/service/shared/errs"
)

// Audit stores the users' audit logs in the Data table: one item per
// event in the collection AUDIT#<userId>, sort key EV#<event id> (ids
// order by time, so a Query in descending order is newest first), with
// expiresAt (epoch seconds) as its TTL. An event is never updated. It
// implements audit.Store.
type Audit struct {
	table dynamo.Table
}

// NewAudit returns an Audit over the named Data table.
func NewAudit(db *dynamo.DB, dataTable string) *Audit {
	return &Audit{table: db.Table(dataTable)}
}

func auditPK(userID string) string { return "AUDIT#" + userID }

const auditSKPrefix = "EV#"

type auditItem struct {
	PK        string
	SK        string
	ID        string `dynamo:"id"`
	Type      string `dynamo:"type"`
	At        string `dynamo:"at"`
	IP        string `dynamo:"ip"`
	UserAgent string `dynamo:"userAgent"`
	Details   string `dynamo:"details"` // JSON
	ExpiresAt int64  `dynamo:"expiresAt"`
}

// AppendAudit writes e, conditioned on its key being new (an event is
// never overwritten).
func (s *Audit) AppendAudit(ctx context.Context, userID string, e audit.Event, expires time.Time) error {
	const op = "store.AppendAudit"
	d, err := json.Marshal(e.Details)
	if err != nil {
		return errs.E(op, errs.Invalid, "INVALID_DETAILS", "audit details are not JSON")
	}
	it := auditItem{PK: auditPK(userID), SK: auditSKPrefix + e.ID, ID: e.ID, Type: string(e.Type), At: e.At.UTC().Format(time.RFC3339Nano),
		IP: e.IP, UserAgent: e.UserAgent, Details: string(d), ExpiresAt: expires.Unix()}
	return storeError(op, s.table.Put(it).If("attribute_not_exists(PK)").Run(ctx))
}

var errBadAuditCursor = badCursor("store.AuditPage")

// AuditPage returns up to limit of userID's events, newest first, after
// the event cursor names: one Query of at most limit+1 items. Events past
// their retention that TTL has not removed yet are left out.
func (s *Audit) AuditPage(ctx context.Context, userID string, limit int, cursor string) ([]audit.Event, string, error) {
	const op = "store.AuditPage"
	q := s.table.Get("PK", auditPK(userID)).Range("SK", dynamo.BeginsWith, auditSKPrefix).
		Order(dynamo.Descending).SearchLimit(limit + 1)
	if cursor != "" {
		if !validAuditID(cursor) {
			return nil, "", errBadAuditCursor
		}
		q = q.StartFrom(dynamo.PagingKey{"PK": &types.AttributeValueMemberS{Value: auditPK(userID)}, "SK": &types.AttributeValueMemberS{Value: auditSKPrefix + cursor}})
	}
	var items []auditItem
	lek, err := q.AllWithLastEvaluatedKey(ctx, &items)
	if err != nil {
		return nil, "", storeError(op, err)
	}
	items, next := pageOf(items, limit, lek != nil, func(it auditItem) string { return it.ID })
	now := time.Now().Unix()
	out := make([]audit.Event, 0, len(items))
	for _, it := range items {
		if it.ExpiresAt != 0 && it.ExpiresAt < now {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, it.At)
		e := audit.Event{ID: it.ID, Type: audit.Type(it.Type), At: at, IP: it.IP, UserAgent: it.UserAgent, Details: map[string]any{}}
		if it.Details != "" {
			if err := json.Unmarshal([]byte(it.Details), &e.Details); err != nil {
				return nil, "", errs.Wrap(op, fmt.Errorf("audit event %s: malformed details: %w", it.ID, err))
			}
		}
		out = append(out, e)
	}
	return out, next, nil
}

// DeleteAudit removes userID's whole log (account erasure).
func (s *Audit) DeleteAudit(ctx context.Context, userID string) error {
	return storeError("store.DeleteAudit", deleteCollection(ctx, s.table, auditPK(userID), ""))
}

func validAuditID(id string) bool {
	if len(id) != audit.IDLen {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
