package dynamolocal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"
	"github.com/truora/minidyn/server"
)

// post sends a raw JSON 1.0 request and returns status, content type and body.
func post(t *testing.T, url, op, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

func errorCode(err error) string {
	var apiErr interface{ ErrorCode() string }
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

func TestDescribeAndWait(t *testing.T) {
	t.Parallel()
	e, db, client := start(t)
	table := seedMessages(t, db) // CreateTable(...).Wait already passed here
	ctx := ctxT(t)
	if err := table.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	desc, err := table.Describe().Run(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if desc.Status != dynamo.ActiveStatus || !desc.Active() {
		t.Errorf("status %q, want ACTIVE", desc.Status)
	}
	if desc.ARN != "arn:aws:dynamodb:us-east-1:000000000000:table/msgs" {
		t.Errorf("ARN %q", desc.ARN)
	}
	if desc.HashKey != "Chat" || desc.RangeKey != "Seq" || desc.HashKeyType != dynamo.StringType || desc.RangeKeyType != dynamo.NumberType {
		t.Errorf("keys %s/%s types %s/%s", desc.HashKey, desc.RangeKey, desc.HashKeyType, desc.RangeKeyType)
	}
	if !desc.OnDemand || desc.Items != 15 || desc.Created.IsZero() {
		t.Errorf("OnDemand %v Items %d Created %v", desc.OnDemand, desc.Items, desc.Created)
	}
	if len(desc.GSI) != 1 {
		t.Fatalf("GSIs %+v", desc.GSI)
	}
	gsi := desc.GSI[0]
	if gsi.Name != "ByAuthor" || gsi.Status != dynamo.ActiveStatus || gsi.ARN != desc.ARN+"/index/ByAuthor" ||
		gsi.HashKey != "Author" || gsi.RangeKey != "Stamp" || gsi.ProjectionType != dynamo.AllProjection {
		t.Errorf("GSI %+v", gsi)
	}

	// The raw SDK sees the same completed description, and CreateTable's
	// answer already says ACTIVE.
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("msgs")})
	if err != nil {
		t.Fatal(err)
	}
	if out.Table.TableStatus != types.TableStatusActive || aws.ToString(out.Table.GlobalSecondaryIndexes[0].IndexArn) == "" {
		t.Errorf("DescribeTable %+v", out.Table)
	}
	created, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:             aws.String("prov"),
		AttributeDefinitions:  []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:             []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		ProvisionedThroughput: &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(3), WriteCapacityUnits: aws.Int64(4)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if td := created.TableDescription; td.TableStatus != types.TableStatusActive ||
		aws.ToInt64(td.ProvisionedThroughput.ReadCapacityUnits) != 3 || aws.ToInt64(td.ProvisionedThroughput.WriteCapacityUnits) != 4 {
		t.Errorf("CreateTable description %+v", td)
	}
	waiter := dynamodb.NewTableExistsWaiter(client)
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("prov")}, 5*time.Second); err != nil {
		t.Errorf("TableExistsWaiter: %v", err)
	}

	// Delete and wait for it to be gone; then Describe is ResourceNotFound.
	if err := db.Table("prov").DeleteTable().Wait(ctx); err != nil {
		t.Fatalf("DeleteTable.Wait: %v", err)
	}
	_, err = client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("prov")})
	var rnf *types.ResourceNotFoundException
	if !errors.As(err, &rnf) {
		t.Fatalf("describe deleted table: %v, want ResourceNotFoundException", err)
	}
	status, _, body := post(t, e.URL, "DescribeTable", `{"TableName":"prov"}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException"`) {
		t.Errorf("raw describe of deleted table: %d %s", status, body)
	}
}

func TestTTL(t *testing.T) {
	t.Parallel()
	e, db, client := start(t)
	table := seedMessages(t, db)
	ctx := ctxT(t)

	desc, err := table.DescribeTTL().Run(ctx)
	if err != nil || desc.Status != dynamo.TTLDisabled || desc.Enabled() {
		t.Fatalf("initial TTL %+v, %v; want DISABLED", desc, err)
	}
	if err := table.UpdateTTL("ExpiresAt", true).Run(ctx); err != nil {
		t.Fatalf("enable TTL: %v", err)
	}
	desc, err = table.DescribeTTL().Run(ctx)
	if err != nil || !desc.Enabled() || desc.Attribute != "ExpiresAt" {
		t.Fatalf("TTL after enable %+v, %v", desc, err)
	}
	if err := table.UpdateTTL("ExpiresAt", true).Run(ctx); errorCode(err) != "ValidationException" {
		t.Fatalf("enable twice: %v, want ValidationException", err)
	}
	out, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String("msgs"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ExpiresAt"), Enabled: aws.Bool(false)},
	})
	if err != nil || aws.ToBool(out.TimeToLiveSpecification.Enabled) || aws.ToString(out.TimeToLiveSpecification.AttributeName) != "ExpiresAt" {
		t.Fatalf("disable TTL: %+v, %v", out, err)
	}
	dout, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("msgs")})
	if err != nil || dout.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusDisabled {
		t.Fatalf("TTL after disable %+v, %v", dout, err)
	}

	for _, op := range []string{"DescribeTimeToLive", "UpdateTimeToLive"} {
		status, ctype, body := post(t, e.URL, op, `{"TableName":"nope","TimeToLiveSpecification":{"AttributeName":"x","Enabled":true}}`)
		var got map[string]string
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s body %s: %v", op, body, err)
		}
		if status != http.StatusBadRequest || ctype != "application/x-amz-json-1.0" ||
			got["__type"] != "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException" || got["message"] == "" {
			t.Errorf("%s unknown table: %d %s %s", op, status, ctype, body)
		}
	}
	_, err = db.Table("nope").DescribeTTL().Run(ctx)
	var rnf *types.ResourceNotFoundException
	if !errors.As(err, &rnf) {
		t.Errorf("guregu DescribeTTL unknown table: %v", err)
	}
}

func TestListTables(t *testing.T) {
	t.Parallel()
	e, db, client := start(t)
	ctx := ctxT(t)
	type item struct {
		ID string `dynamo:"ID,hash"`
	}
	names := []string{"e", "a", "d", "c", "b"}
	for _, n := range names {
		if err := db.CreateTable(n, item{}).OnDemand(true).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(names)
	all, err := db.ListTables().All(ctx)
	if err != nil || !slices.Equal(all, names) {
		t.Fatalf("guregu ListTables %v, %v; want %v", all, err, names)
	}
	tests := []struct {
		limit int32
		start string
		want  [][]string
	}{
		{limit: 2, want: [][]string{{"a", "b"}, {"c", "d"}, {"e"}}},
		{limit: 5, want: [][]string{{"a", "b", "c", "d", "e"}}},
		{limit: 1, start: "c", want: [][]string{{"d"}, {"e"}}},
		{limit: 3, start: "bb", want: [][]string{{"c", "d", "e"}}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("limit %d from %q", tc.limit, tc.start), func(t *testing.T) {
			in := &dynamodb.ListTablesInput{Limit: aws.Int32(tc.limit)}
			if tc.start != "" {
				in.ExclusiveStartTableName = aws.String(tc.start)
			}
			var pages [][]string
			for p := dynamodb.NewListTablesPaginator(client, in); p.HasMorePages(); {
				out, err := p.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				pages = append(pages, out.TableNames)
			}
			if !slices.EqualFunc(pages, tc.want, slices.Equal) {
				t.Fatalf("pages %v, want %v", pages, tc.want)
			}
		})
	}
	if _, err := client.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(0)}); errorCode(err) != "ValidationException" {
		t.Errorf("Limit 0: %v, want ValidationException", err)
	}
	if err := db.Table("c").DeleteTable().Run(ctx); err != nil {
		t.Fatal(err)
	}
	if all, err := db.ListTables().All(ctx); err != nil || !slices.Equal(all, []string{"a", "b", "d", "e"}) {
		t.Fatalf("after delete %v, %v", all, err)
	}
	// Tables dropped behind the layer's back disappear too.
	e.WithBackend(func(b *server.Server) {
		if err := b.Reset(); err != nil {
			t.Errorf("Reset: %v", err)
		}
	})
	if all, err := db.ListTables().All(ctx); err != nil || len(all) != 0 {
		t.Fatalf("after Reset %v, %v", all, err)
	}
	// With no tables the answer is an empty list, not null.
	status, _, body := post(t, e.URL, "ListTables", `{}`)
	if status != http.StatusOK || !bytes.Equal(bytes.TrimSpace(body), []byte(`{"TableNames":[]}`)) {
		t.Errorf("empty ListTables: %d %s", status, body)
	}
}
