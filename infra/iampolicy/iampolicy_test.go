package iampolicy_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/infra/dynamolocal"
	"github.com/workflowchat/service/infra/iampolicy"
	"github.com/workflowchat/service/shared/store"
)

// testTemplate has one function of each kind of statement the package
// evaluates.
const testTemplate = `
Conditions:
  On: !Equals [a, a]
Resources:
  DataTable:
    Type: AWS::DynamoDB::Table
  OtherTable:
    Type: AWS::DynamoDB::Table
  Bucket:
    Type: AWS::S3::Bucket
  Reader:
    Type: AWS::Serverless::Function
    Properties:
      Policies:
        - Version: "2012-10-17"
          Statement:
            - Sid: Get
              Effect: Allow
              Action: [dynamodb:GetItem, "dynamodb:Batch*"]
              Resource: [!GetAtt DataTable.Arn]
            - Sid: OneIndex
              Effect: Allow
              Action: dynamodb:Query
              Resource: !Sub "${DataTable.Arn}/index/GSI1"
            - Sid: Blobs
              Effect: Allow
              Action: [s3:GetObject]
              Resource: "*"
  Auditor:
    Type: AWS::Serverless::Function
    Properties:
      Policies:
        - Statement:
            - Sid: Audit
              Effect: Allow
              Action: [dynamodb:PutItem, dynamodb:Query]
              Resource: [!GetAtt DataTable.Arn]
              Condition:
                ForAllValues:StringLike:
                  dynamodb:LeadingKeys: ["AUDIT#*", "USER#?"]
        - !If
          - On
          - Statement:
              - Sid: Indexes
                Effect: Allow
                Action: [dynamodb:Query]
                Resource: [!Sub "${OtherTable.Arn}/index/*"]
          - !Ref AWS::NoValue
  Denied:
    Type: AWS::Serverless::Function
    Properties:
      Policies:
        - Statement:
            - Sid: All
              Effect: Allow
              Action: "dynamodb:*"
              Resource: "*"
            - Sid: NoDeletes
              Effect: Deny
              Action: [dynamodb:DeleteItem]
              Resource: [!GetAtt OtherTable.Arn]
  Bare:
    Type: AWS::Serverless::Function
    Properties: {}
`

func TestAllow(t *testing.T) {
	t.Parallel()
	p, err := iampolicy.Load([]byte(testTemplate))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Functions(), ","); got != "Auditor,Bare,Denied,Reader" {
		t.Fatalf("Functions() = %s", got)
	}
	keys := func(k ...string) []string { return k }
	tests := []struct {
		name string
		fn   string
		r    iampolicy.Request
		want string // "" allowed, else a part of the refusal
	}{
		{"listed action", "Reader", iampolicy.Request{Action: "dynamodb:GetItem", Table: "DataTable", LeadingKeys: keys("X")}, ""},
		{"action wildcard", "Reader", iampolicy.Request{Action: "dynamodb:BatchWriteItem", Table: "DataTable", LeadingKeys: keys("X")}, ""},
		{"actions are case-insensitive", "Reader", iampolicy.Request{Action: "DynamoDB:GETITEM", Table: "DataTable"}, ""},
		{"action not granted", "Reader", iampolicy.Request{Action: "dynamodb:PutItem", Table: "DataTable"}, "no identity-based policy allows the dynamodb:PutItem"},
		{"other table", "Reader", iampolicy.Request{Action: "dynamodb:GetItem", Table: "OtherTable"}, "table/OtherTable"},
		{"a table's grant is not its indexes'", "Reader", iampolicy.Request{Action: "dynamodb:GetItem", Table: "DataTable", Index: "GSI1"}, "index/GSI1"},
		{"named index", "Reader", iampolicy.Request{Action: "dynamodb:Query", Table: "DataTable", Index: "GSI1"}, ""},
		{"another index", "Reader", iampolicy.Request{Action: "dynamodb:Query", Table: "DataTable", Index: "GSI2"}, "index/GSI2"},
		{"an index's grant is not its table's", "Reader", iampolicy.Request{Action: "dynamodb:Query", Table: "DataTable"}, "table/DataTable"},
		{"leading keys all match", "Auditor", iampolicy.Request{Action: "dynamodb:PutItem", Table: "DataTable", LeadingKeys: keys("AUDIT#1", "USER#a")}, ""},
		{"one leading key off", "Auditor", iampolicy.Request{Action: "dynamodb:PutItem", Table: "DataTable", LeadingKeys: keys("AUDIT#1", "CHAT#1")}, "CHAT#1"},
		{"? is one character", "Auditor", iampolicy.Request{Action: "dynamodb:PutItem", Table: "DataTable", LeadingKeys: keys("USER#ab")}, "USER#ab"},
		{"no keys hold ForAllValues, as in IAM", "Auditor", iampolicy.Request{Action: "dynamodb:Query", Table: "DataTable"}, ""},
		{"both branches of an If", "Auditor", iampolicy.Request{Action: "dynamodb:Query", Table: "OtherTable", Index: "ByUser"}, ""},
		{"index wildcard is not the table", "Auditor", iampolicy.Request{Action: "dynamodb:Query", Table: "OtherTable"}, "not authorized"},
		{"star resource", "Denied", iampolicy.Request{Action: "dynamodb:DeleteItem", Table: "DataTable"}, ""},
		{"explicit deny wins", "Denied", iampolicy.Request{Action: "dynamodb:DeleteItem", Table: "OtherTable"}, "explicit deny"},
		{"no policy", "Bare", iampolicy.Request{Action: "dynamodb:GetItem", Table: "DataTable"}, "not authorized"},
		{"not a function", "Nobody", iampolicy.Request{Action: "dynamodb:GetItem", Table: "DataTable"}, "not a function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := p.Allow(tt.fn, tt.r)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Allow = %v, want allowed", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Allow = %v, want a refusal naming %q", err, tt.want)
			}
		})
	}
}

func TestLoadRefusesWhatItCannotEvaluate(t *testing.T) {
	t.Parallel()
	fn := func(stmt string) string {
		return "Resources:\n  DataTable:\n    Type: AWS::DynamoDB::Table\n  F:\n    Type: AWS::Serverless::Function\n    Properties:\n      Policies:\n        - Statement:\n" + stmt
	}
	tests := []struct{ name, template, want string }{
		{"another condition", fn(`            - Effect: Allow
              Action: dynamodb:Query
              Resource: !GetAtt DataTable.Arn
              Condition:
                StringEquals:
                  dynamodb:Select: SPECIFIC_ATTRIBUTES
`), "condition StringEquals dynamodb:Select"},
		{"NotAction", fn(`            - Effect: Allow
              NotAction: s3:*
              Action: dynamodb:Query
              Resource: "*"
`), "NotAction"},
		{"not a table", fn(`            - Effect: Allow
              Action: dynamodb:Query
              Resource: !GetAtt F.Arn
`), "F is not a table"},
		{"a literal ARN", fn(`            - Effect: Allow
              Action: dynamodb:Query
              Resource: arn:aws:dynamodb:us-east-1:1:table/data
`), "is not evaluated"},
		{"no Effect", fn(`            - Action: dynamodb:Query
              Resource: "*"
`), "Effect"},
		{"not YAML", "Resources: [", "read template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := iampolicy.Load([]byte(tt.template))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

// TestTemplateLoads: the project's template is one Load evaluates whole.
func TestTemplateLoads(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := iampolicy.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Functions()); n < 10 {
		t.Errorf("the template has %d functions, want all of them", n)
	}
}

// TestGuard drives the embedded engine behind a Guard with the SDK, as
// the local stack does: each call signed with a function's logical id is
// held to that function's statements, item by item in a transaction,
// with the keys of batches and queries.
func TestGuard(t *testing.T) {
	t.Parallel()
	p, err := iampolicy.Load([]byte(testTemplate))
	if err != nil {
		t.Fatal(err)
	}
	var guard *iampolicy.Guard
	tables := []iampolicy.Table{{Name: "data", LogicalID: "DataTable", HashKey: "PK", IndexHashKeys: map[string]string{"GSI1": "GSI1PK", "GSI2": "GSI2PK"}}}
	eng, err := dynamolocal.StartWith(dynamolocal.Options{Wrap: func(h http.Handler) http.Handler {
		guard = p.NewGuard(h, tables, slog.New(slog.DiscardHandler))
		return guard
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	ctx := context.Background()
	open := func(id string) *dynamo.DB {
		db, err := store.Open(ctx, store.Options{Region: "us-east-1", Endpoint: eng.URL, AccessKeyID: id})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	admin := open("")
	if err := store.CreateTables(ctx, admin.Client(), map[string]string{"DATA_TABLE": "data", "USERS_TABLE": "users", "SESSIONS_TABLE": "sessions",
		"RATE_LIMITS_TABLE": "rate_limits", "OAUTH_TABLE": "oauth"}); err != nil {
		t.Fatal(err)
	}
	type item struct{ PK, SK string }
	auditor, reader := open("Auditor"), open("Reader")
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	tests := []struct {
		name   string
		call   func() error
		denied bool
	}{
		{"the stack's own calls pass", func() error { return admin.Table("data").Put(item{"CHAT#1", "a"}).Run(ctx) }, false},
		{"a put in the granted collection", func() error { return auditor.Table("data").Put(item{"AUDIT#1", "a"}).Run(ctx) }, false},
		{"a put elsewhere", func() error { return auditor.Table("data").Put(item{"CHAT#1", "b"}).Run(ctx) }, true},
		{"a query of the granted collection (KeyConditions)", func() error {
			var out []item
			return auditor.Table("data").Get("PK", "AUDIT#1").All(ctx, &out)
		}, false},
		{"a query of another collection", func() error {
			var out []item
			return auditor.Table("data").Get("PK", "CHAT#1").All(ctx, &out)
		}, true},
		{"a query by expression", func() error {
			_, err := auditor.Client().Query(ctx, &dynamodb.QueryInput{TableName: aws.String("data"), KeyConditionExpression: aws.String("#p = :p AND SK > :s"),
				ExpressionAttributeNames: map[string]string{"#p": "PK"}, ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("AUDIT#1"), ":s": s("")}})
			return err
		}, false},
		{"a transaction checks each item", func() error {
			return auditor.WriteTx().Put(auditor.Table("data").Put(item{"AUDIT#1", "c"})).Put(auditor.Table("data").Put(item{"CHAT#1", "c"})).Run(ctx)
		}, true},
		{"a transaction of granted items", func() error {
			return auditor.WriteTx().Put(auditor.Table("data").Put(item{"AUDIT#1", "d"})).Put(auditor.Table("data").Put(item{"USER#x", "d"})).Run(ctx)
		}, false},
		{"a batch write within its grant", func() error {
			_, err := reader.Table("data").Batch("PK", "SK").Write().Delete(dynamo.Keys{"CHAT#1", "a"}).Run(ctx)
			return err
		}, false},
		{"a get", func() error {
			var out item
			return reader.Table("data").Get("PK", "AUDIT#1").Range("SK", dynamo.Equal, "a").One(ctx, &out)
		}, false},
		{"a put without the action", func() error { return reader.Table("data").Put(item{"AUDIT#1", "e"}).Run(ctx) }, true},
		{"a scan", func() error {
			var out []item
			return auditor.Table("data").Scan().All(ctx, &out)
		}, true},
		{"an index it may query", func() error {
			var out []item
			return reader.Table("data").Get("GSI1PK", "X").Index("GSI1").All(ctx, &out)
		}, false},
		{"an index it may not", func() error {
			var out []item
			return reader.Table("data").Get("GSI2PK", "X").Index("GSI2").All(ctx, &out)
		}, true},
	}
	for _, tt := range tests {
		before := len(guard.Denied())
		err := tt.call()
		var ae smithy.APIError
		isDenied := errors.As(err, &ae) && ae.ErrorCode() == "AccessDeniedException"
		switch {
		case tt.denied && !isDenied:
			t.Errorf("%s: %v, want AccessDeniedException", tt.name, err)
		case !tt.denied && err != nil:
			t.Errorf("%s: %v, want it allowed", tt.name, err)
		}
		if got := len(guard.Denied()) - before; tt.denied && got != 1 || !tt.denied && got != 0 {
			t.Errorf("%s: %d denials recorded", tt.name, got)
		}
	}
}
