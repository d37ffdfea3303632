// Package store is the DynamoDB storage of the service, written with
// aws-sdk-go-v2 and guregu/dynamo. It implements the storage interfaces the
// domain packages declare (auth.Store, model.Preferences, ...), and owns the
// table definitions: the one place in Go that template.yaml is checked
// against and that the local embedded engine is bootstrapped from.
//
// Data model:
//   - Users (PK): USER#<id> is the profile (and the model preference);
//     EMAIL#<email> is the credential, holding the password hash and a copy
//     of the profile, so that sign-in is one read and an email is unique.
//   - Sessions (PK = SHA-256 of the session token, never the token): a
//     snapshot of the user, so an authenticated request costs one read;
//     expiresAt is the TTL attribute (epoch seconds) and is also checked on
//     every read, because TTL deletion is lazy. The UserSessions index
//     (hash key userId) finds a user's sessions to sign out everywhere.
//   - Data (PK, SK, GSI1, GSI2): item collections per chat, per workflow
//     and per workflow run, with the event logs of jobs (joblog.go: a
//     streamed reply in its chat's collection, a run in its own);
//     expiresAt (epoch seconds) is the TTL attribute of the logs. GSI1
//     lists a user's chats and workflows and a workflow's runs, and holds,
//     sparsely, the heads of active jobs (ACTIVE#<shard>), which the
//     sweeper queries; GSI2 lists a chat's runs. Workflow triggers live there too
//     (triggers.go): TRIGGER#<id> holds the trigger, its webhook deliveries
//     and, locally, its due schedule (sparse in GSI1 under TRIGGERS#DUE,
//     which the dev server's poller queries).
//   - RateLimits (PK = RL#<userId>#<rule>#<window seconds>#<window start>):
//     one request counter per user, rule and fixed window (ratelimits.go);
//     expiresAt (epoch seconds) is the TTL attribute.
//   - OAuth (PK): the authorization server's items (oauth.go), each under
//     a kind prefix: CLIENT#<id> registered clients, CODE#<hash>
//     authorization codes, GRANT#<id> grants (refresh token families),
//     REFRESH#<hash> refresh tokens, PAT#<hash> personal access tokens,
//     PATS#<userId> a user's token count, CODES#<userId> and
//     CODES#<userId>#<client hash> a user's code epoch (oauth.Epoch);
//     codes and tokens only by the SHA-256 of their value. expiresAt
//     (epoch seconds) is the TTL attribute of every item but the count and
//     the epoch, which are kept as long as the user (a few bytes). The UserItems
//     index (GSI1PK USER#<userId>, GSI1SK GRANT#... or PAT#...) lists a
//     user's grants and tokens.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Index is a global secondary index with string keys, projecting all
// attributes.
type Index struct {
	Name     string
	HashKey  string
	RangeKey string
}

// Table is the definition of one DynamoDB table. All key attributes are
// strings; billing is on demand.
type Table struct {
	// LogicalID is the table's resource name in template.yaml.
	LogicalID string
	// EnvVar is the environment variable holding the table's name.
	EnvVar string
	// LocalName is the table's name in the local embedded engine.
	LocalName    string
	HashKey      string
	RangeKey     string
	Indexes      []Index
	TTLAttribute string
}

// The tables of the service.
var (
	UsersTable = Table{
		LogicalID: "UsersTable", EnvVar: "USERS_TABLE", LocalName: "users",
		HashKey: "PK",
	}
	SessionsTable = Table{
		LogicalID: "SessionsTable", EnvVar: "SESSIONS_TABLE", LocalName: "sessions",
		HashKey: "PK", TTLAttribute: "expiresAt",
		Indexes: []Index{{Name: SessionsByUserIndex, HashKey: "userId"}},
	}
	DataTable = Table{
		LogicalID: "DataTable", EnvVar: "DATA_TABLE", LocalName: "data",
		HashKey: "PK", RangeKey: "SK", TTLAttribute: "expiresAt",
		Indexes: []Index{{Name: "GSI1", HashKey: "GSI1PK", RangeKey: "GSI1SK"}, {Name: "GSI2", HashKey: "GSI2PK", RangeKey: "GSI2SK"}},
	}
	RateLimitsTable = Table{
		LogicalID: "RateLimitsTable", EnvVar: "RATE_LIMITS_TABLE", LocalName: "rate_limits",
		HashKey: "PK", TTLAttribute: "expiresAt",
	}
	OAuthTable = Table{
		LogicalID: "OAuthTable", EnvVar: "OAUTH_TABLE", LocalName: "oauth",
		HashKey: "PK", TTLAttribute: "expiresAt",
		Indexes: []Index{{Name: OAuthByUserIndex, HashKey: "GSI1PK", RangeKey: "GSI1SK"}},
	}
)

// OAuthByUserIndex is the OAuth table's index of a user's grants and
// personal access tokens (GSI1PK USER#<userId>).
const OAuthByUserIndex = "UserItems"

// SessionsByUserIndex is the Sessions table's index of a user's sessions,
// read only to sign a user out everywhere.
const SessionsByUserIndex = "UserSessions"

// Tables lists every table of the service.
func Tables() []Table {
	return []Table{UsersTable, SessionsTable, DataTable, RateLimitsTable, OAuthTable}
}

// addIndexes adds to the existing table name the indexes of t it lacks.
func addIndexes(ctx context.Context, api TableAPI, t Table, name string) error {
	d, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("store: describe table %s: %w", name, err)
	}
	have := map[string]bool{}
	for _, ix := range d.Table.GlobalSecondaryIndexes {
		have[aws.ToString(ix.IndexName)] = true
	}
	full := t.CreateTableInput(name)
	for _, ix := range full.GlobalSecondaryIndexes {
		if have[aws.ToString(ix.IndexName)] {
			continue
		}
		_, err := api.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), AttributeDefinitions: full.AttributeDefinitions,
			GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
				IndexName: ix.IndexName, KeySchema: ix.KeySchema, Projection: ix.Projection}}}})
		if err != nil {
			return fmt.Errorf("store: add index %s to table %s: %w", aws.ToString(ix.IndexName), name, err)
		}
	}
	return nil
}

// CreateTableInput returns the CreateTable request for t under name.
func (t Table) CreateTableInput(name string) *dynamodb.CreateTableInput {
	attrs := map[string]bool{}
	var defs []types.AttributeDefinition
	attr := func(n string) {
		if n != "" && !attrs[n] {
			attrs[n] = true
			defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS})
		}
	}
	keys := func(hash, rng string) []types.KeySchemaElement {
		attr(hash)
		attr(rng)
		ks := []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}}
		if rng != "" {
			ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange})
		}
		return ks
	}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   keys(t.HashKey, t.RangeKey),
	}
	for _, ix := range t.Indexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  keys(ix.HashKey, ix.RangeKey),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		})
	}
	in.AttributeDefinitions = defs
	return in
}

// TableAPI is the part of the DynamoDB client CreateTables uses.
type TableAPI interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTable(context.Context, *dynamodb.UpdateTableInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateTables creates every table under the name names gives it (by
// EnvVar), enabling TTL where defined. A table that already exists (a
// local engine restored from its data file) gets the indexes it lacks,
// as a new release may add one. In AWS the stack creates the tables; this
// is for local engines.
func CreateTables(ctx context.Context, api TableAPI, names map[string]string) error {
	for _, t := range Tables() {
		name := names[t.EnvVar]
		if name == "" {
			return fmt.Errorf("store: create tables: no name for %s", t.EnvVar)
		}
		_, err := api.CreateTable(ctx, t.CreateTableInput(name))
		var inUse *types.ResourceInUseException
		switch {
		case errors.As(err, &inUse):
			if err := addIndexes(ctx, api, t, name); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("store: create table %s: %w", name, err)
		}
		if t.TTLAttribute != "" {
			_, err := api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
				TableName:               aws.String(name),
				TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(t.TTLAttribute), Enabled: aws.Bool(true)},
			})
			if err != nil {
				return fmt.Errorf("store: enable TTL on %s: %w", name, err)
			}
		}
	}
	return nil
}
