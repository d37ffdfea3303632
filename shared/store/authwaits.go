package store

import (
	"context"
	"strings"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/workflow"
)

// The runs waiting for the authorization of a user's remote server
// (Runs implements workflow.AuthWaits), in the Data table: PK USER#<uid>, SK
// MCPWAIT#<serverId>#<runId>, with the run's id and expiresAt (the
// table's TTL, after the step's deadline). Stored before the run is
// recorded waiting, removed once the authorization continued the run;
// being in the user's partition, the account's erasure removes what is
// left.
const mcpWaitPrefix = "MCPWAIT#"

type authWaitItem struct {
	PK, SK    string
	Type      string `dynamo:"type"`
	UserID    string `dynamo:"userId"`
	ServerID  string `dynamo:"serverId"`
	RunID     string `dynamo:"runId"`
	ExpiresAt int64  `dynamo:"expiresAt"`
}

// PutAuthWait implements workflow.AuthWaits: one PutItem (the same item
// again on a second wait).
func (s *Runs) PutAuthWait(ctx context.Context, w workflow.AuthWait) error {
	it := authWaitItem{PK: userKey(w.UserID), SK: mcpWaitPrefix + w.ServerID + "#" + w.RunID, Type: "mcpAuthWait",
		UserID: w.UserID, ServerID: w.ServerID, RunID: w.RunID, ExpiresAt: w.ExpiresAt.Unix()}
	return storeError("store.PutAuthWait", s.table.Put(it).Run(ctx))
}

// AuthWaits implements workflow.AuthWaits: one consistent Query of at most
// workflow.MaxAuthWaits items.
func (s *Runs) AuthWaits(ctx context.Context, userID, serverID string) ([]workflow.AuthWait, error) {
	var items []authWaitItem
	err := s.table.Get("PK", userKey(userID)).Range("SK", dynamo.BeginsWith, mcpWaitPrefix+serverID+"#").
		Consistent(true).Limit(workflow.MaxAuthWaits).All(ctx, &items)
	if err != nil {
		return nil, storeError("store.AuthWaits", err)
	}
	out := make([]workflow.AuthWait, 0, len(items))
	for _, it := range items {
		if it.RunID == "" || !strings.HasPrefix(it.SK, mcpWaitPrefix) {
			continue
		}
		out = append(out, workflow.AuthWait{UserID: it.UserID, ServerID: it.ServerID, RunID: it.RunID, ExpiresAt: time.Unix(it.ExpiresAt, 0).UTC()})
	}
	return out, nil
}

// DeleteAuthWait implements workflow.AuthWaits: one DeleteItem.
func (s *Runs) DeleteAuthWait(ctx context.Context, w workflow.AuthWait) error {
	return storeError("store.DeleteAuthWait", s.table.Delete("PK", userKey(w.UserID)).Range("SK", mcpWaitPrefix+w.ServerID+"#"+w.RunID).Run(ctx))
}
