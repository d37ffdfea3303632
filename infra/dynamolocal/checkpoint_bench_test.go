package dynamolocal

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/truora/minidyn/server"
)

// checkpointTable is the application's data table: PK, SK and two
// global secondary indexes.
const checkpointTable = `{"AttributeDefinitions":[{"AttributeName":"PK","AttributeType":"S"},{"AttributeName":"SK","AttributeType":"S"},{"AttributeName":"GSI1PK","AttributeType":"S"},{"AttributeName":"GSI1SK","AttributeType":"S"},{"AttributeName":"GSI2PK","AttributeType":"S"},{"AttributeName":"GSI2SK","AttributeType":"S"}],"BillingMode":"PAY_PER_REQUEST","GlobalSecondaryIndexes":[{"IndexName":"GSI1","KeySchema":[{"AttributeName":"GSI1PK","KeyType":"HASH"},{"AttributeName":"GSI1SK","KeyType":"RANGE"}],"Projection":{"ProjectionType":"ALL"}},{"IndexName":"GSI2","KeySchema":[{"AttributeName":"GSI2PK","KeyType":"HASH"},{"AttributeName":"GSI2SK","KeyType":"RANGE"}],"Projection":{"ProjectionType":"ALL"}}],"KeySchema":[{"AttributeName":"PK","KeyType":"HASH"},{"AttributeName":"SK","KeyType":"RANGE"}],"TableName":"data"}`

// checkpointSteps is a ten-step run's steps as the store keeps them (a
// JSON string), the first done steps completed.
func checkpointSteps(done int) string {
	var steps []map[string]any
	for i := range 10 {
		s := map[string]any{"id": fmt.Sprintf("s%d", i), "toolId": "json_query", "status": "pending"}
		if i <= done {
			s["status"], s["startedAt"], s["input"] = "running", "2026-12-02T16:35:35.594900383Z", map[string]any{"input": map[string]any{"a": 1}, "query": ".a"}
		}
		if i < done {
			s["status"], s["completedAt"], s["output"] = "completed", "2026-12-02T16:35:35.608284817Z", map[string]any{"result": 1}
		}
		steps = append(steps, s)
	}
	return string(mustJSON(steps))
}

// checkpointBody is the TransactWriteItems a durable step's checkpoint
// sends (shared/store's SaveCheckpoint, as captured): a conditional
// update of the run's record and a conditional put of its new events.
func checkpointBody(run string, seq int) []byte {
	steps := string(mustJSON(checkpointSteps(seq % 10)))
	events := string(mustJSON(`[{"type":"step_completed","runId":"` + run + `","stepId":"s1","toolId":"json_query","output":{"result":1}},{"type":"step_started","runId":"` + run + `","stepId":"s2","toolId":"json_query","input":{"input":{"a":1},"query":".a"}}]`))
	return []byte(`{"ClientRequestToken":"e77f587d-374c-4c22-83d4-6b31729547f7","TransactItems":[` +
		`{"Update":{"ConditionExpression":"(attribute_exists(PK) AND #sON2GC5DVOM = :v4 AND (attempt = :v5 OR (attribute_not_exists(attempt) AND :v6 = :v7)))",` +
		`"ExpressionAttributeNames":{"#sON2GC5DVOM":"status","#sMVZHE33S":"error"},` +
		`"ExpressionAttributeValues":{":v4":{"S":"running"},":v5":{"N":"1"},":v6":{"N":"1"},":v7":{"N":"1"},":v0":{"S":"running"},":v1":{"S":` + steps + `},":v2":{"N":"1"},":v3":{"N":"` + fmt.Sprint(seq) + `"}},` +
		`"Key":{"SK":{"S":"RUN"},"PK":{"S":"RUN#` + run + `"}},"TableName":"data",` +
		`"UpdateExpression":"SET #sON2GC5DVOM = :v0, steps = :v1, logSeq = :v3 ADD version :v2 REMOVE #sMVZHE33S, completedAt"}},` +
		`{"Put":{"ConditionExpression":"(attribute_not_exists(PK) OR #sOR4XAZI = :v0)","ExpressionAttributeNames":{"#sOR4XAZI":"type"},"ExpressionAttributeValues":{":v0":{"S":"logbeat"}},` +
		`"Item":{"reserved":{"N":"6"},"events":{"S":` + events + `},"type":{"S":"log"},"first":{"N":"5"},"expiresAt":{"N":"1796315735"},"PK":{"S":"RUN#` + run + `"},` +
		`"SK":{"S":"STREAM#` + run + fmt.Sprintf("#%012d", seq) + `"},"last":{"N":"6"},"prev":{"N":"4"}},"TableName":"data"}}]}`)
}

// stepMapBody is the checkpoint as shared/store sends it since a run's
// steps are members of its stepMap (as captured): the update sets only
// the two steps that changed, the step that ended and the one that
// starts.
func stepMapBody(run string, seq int) []byte {
	s1 := string(mustJSON(`{"id":"s1","toolId":"json_query","status":"completed","startedAt":"2026-12-02T21:01:24.323801542Z","completedAt":"2026-12-02T21:01:24.325867754Z","input":{"input":{"a":1},"query":".a"},"output":{"result":1}}`))
	s2 := string(mustJSON(`{"id":"s2","toolId":"json_query","status":"running","startedAt":"2026-12-02T21:01:24.325893072Z","input":{"input":{"a":1},"query":".a"}}`))
	events := string(mustJSON(`[{"type":"step_completed","runId":"` + run + `","stepId":"s1","toolId":"json_query","output":{"result":1}},{"type":"step_started","runId":"` + run + `","stepId":"s2","toolId":"json_query","input":{"input":{"a":1},"query":".a"}}]`))
	return []byte(`{"ClientRequestToken":"2a8220ac-8669-4ace-9cde-ac3b2ee0c378","TransactItems":[{"Update":{"ConditionExpression":"(attribute_exists(PK) AND #sON2GC5DVOM = :v5 AND (attempt = :v6 OR (attribute_not_exists(attempt) AND :v7 = :v8)))",` +
		`"ExpressionAttributeNames":{"#sON2GC5DVOM":"status","#sMVZHE33S":"error"},"ExpressionAttributeValues":{":v0":{"S":"running"},":v1":{"N":"1"},":v2":{"S":` + s1 + `},":v3":{"S":` + s2 + `},":v5":{"S":"running"},":v4":{"N":"` + fmt.Sprint(seq) + `"},":v6":{"N":"1"},":v7":{"N":"1"},":v8":{"N":"1"}},` +
		`"Key":{"PK":{"S":"RUN#` + run + `"},"SK":{"S":"RUN"}},"TableName":"data","UpdateExpression":"SET #sON2GC5DVOM = :v0, stepMap.s001 = :v2, stepMap.s002 = :v3, logSeq = :v4 ADD version :v1 REMOVE #sMVZHE33S, completedAt"}},` +
		`{"Put":{"ConditionExpression":"(attribute_not_exists(PK) OR #sOR4XAZI = :v0)","ExpressionAttributeNames":{"#sOR4XAZI":"type"},"ExpressionAttributeValues":{":v0":{"S":"logbeat"}},` +
		`"Item":{"type":{"S":"log"},"first":{"N":"5"},"SK":{"S":"STREAM#` + run + fmt.Sprintf("#%012d", seq) + `"},"prev":{"N":"4"},"events":{"S":` + events + `},"expiresAt":{"N":"1796331684"},"PK":{"S":"RUN#` + run + `"},"last":{"N":"6"},"reserved":{"N":"6"}},"TableName":"data"}}]}`)
}

// seedStepMap is a ten-step run's stepMap, every step pending.
func seedStepMap() string {
	m := make([]string, 10)
	for i := range m {
		m[i] = fmt.Sprintf(`"s%03d":{"S":%s}`, i, mustJSON(fmt.Sprintf(`{"id":"s%d","toolId":"json_query","status":"pending"}`, i)))
	}
	return "{" + strings.Join(m, ",") + "}"
}

// BenchmarkCheckpoint measures the engine's own work on a durable
// step's checkpoint transaction and on its floor, a PutItem of a 1 KB
// item (put_1KB). The checkpoint comes in the shape that wrote a run's
// steps whole (checkpoint) and in today's, which sets only the steps
// that changed (checkpoint_stepMap). No HTTP, no journal, one request at
// a time, the requests' bodies made before the timer. cpu-ns/op is the
// process's CPU time (user and system, the collector's included) per
// request.
func BenchmarkCheckpoint(b *testing.B) {
	run := "f6175c56-20c2-465e-8159-200920a9fe23"
	pad := string(mustJSON(strings.Repeat("p", 900)))
	for _, c := range []struct {
		name, op string
		body     func(i int) []byte
	}{
		{"put_1KB", "PutItem", func(i int) []byte {
			return []byte(`{"TableName":"data","Item":{"PK":{"S":"FLOOR#` + run + `"},"SK":{"S":"W#` + fmt.Sprint(i%10) + `"},"pad":{"S":` + pad + `}}}`)
		}},
		{"checkpoint", "TransactWriteItems", func(i int) []byte { return checkpointBody(run, i+1) }},
		{"checkpoint_stepMap", "TransactWriteItems", func(i int) []byte { return stepMapBody(run, i+1) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			h := newHandler(server.NewServer())
			do := func(op string, body []byte) {
				rep, err := h.dispatch(ctx, op, body, "us-east-1")
				if err == nil && rep.status != http.StatusOK {
					err = fmt.Errorf("%s: %s", op, rep.body)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			do("CreateTable", []byte(checkpointTable))
			do("PutItem", []byte(`{"TableName":"data","Item":{"PK":{"S":"RUN#`+run+`"},"SK":{"S":"RUN"},"status":{"S":"running"},"attempt":{"N":"1"},"version":{"N":"1"},`+
				`"workflowId":{"S":"w"},"chatId":{"S":"c"},"userId":{"S":"u"},"GSI1PK":{"S":"USER#u"},"GSI1SK":{"S":"RUN#2026-12-02T16:35:35Z"},`+
				`"definition":{"S":`+string(mustJSON(strings.Repeat("x", 600)))+`},"steps":{"S":`+string(mustJSON(checkpointSteps(0)))+`},"stepMap":{"M":`+seedStepMap()+`}}}`))
			bodies := make([][]byte, b.N)
			for i := range bodies {
				bodies[i] = c.body(i)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				do(c.op, bodies[i])
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
