package iampolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
)

// Table is what Guard knows of a table: its name at the engine, its
// logical id in the template and its keys' attribute names.
type Table struct {
	Name, LogicalID string
	HashKey         string
	// IndexHashKeys are its indexes' partition key attributes, by name.
	IndexHashKeys map[string]string
}

// Guard checks each DynamoDB request to next whose SigV4 access key id
// names a function of p (the local stack signs each function's calls with
// its logical id) against that function's statements, before next sees
// it: a request some part of which is not allowed is answered 400
// AccessDeniedException, as AWS answers it, and recorded (Denied). A
// request signed with another key id (the stack's own: creating tables)
// is passed on unchecked.
type Guard struct {
	p      *Policies
	next   http.Handler
	tables map[string]Table
	logger *slog.Logger

	mu     sync.Mutex
	denied []string
}

// NewGuard returns the Guard of next for tables; logger receives each
// denial at ERROR (nil: slog.Default()).
func (p *Policies) NewGuard(next http.Handler, tables []Table, logger *slog.Logger) *Guard {
	if logger == nil {
		logger = slog.Default()
	}
	g := &Guard{p: p, next: next, tables: map[string]Table{}, logger: logger}
	for _, t := range tables {
		g.tables[t.Name] = t
	}
	return g
}

// Denied returns the denials so far, each as its message.
func (g *Guard) Denied() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.denied...)
}

func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fn := accessKeyID(r.Header.Get("Authorization"))
	if _, ok := g.p.byFunction[fn]; !ok || r.Method != http.MethodPost {
		g.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read request", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	reqs, err := g.requests(op, body)
	if err == nil {
		for _, q := range reqs {
			if err = g.p.Allow(fn, q); err != nil {
				break
			}
		}
	}
	if err != nil {
		msg := err.Error()
		if op == "DescribeTable" {
			// guregu/dynamo asks for a table's keys when a Query with a
			// Limit stops where the engine gave no LastEvaluatedKey (it
			// gives none when the page ends the results; DynamoDB gives
			// one whenever the Limit is reached), and goes on without
			// them when refused: answered as AWS would, not a failure.
			g.logger.Debug("iampolicy: AccessDenied", "function", fn, "operation", op, "err", msg)
		} else {
			g.mu.Lock()
			g.denied = append(g.denied, msg)
			g.mu.Unlock()
			g.logger.Error("iampolicy: AccessDenied", "function", fn, "operation", op, "err", msg)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]string{"__type": "com.amazon.coral.service#AccessDeniedException", "message": msg})
		_, _ = w.Write(b)
		return
	}
	g.next.ServeHTTP(w, r)
}

// accessKeyID returns the access key id of a SigV4 Authorization header.
func accessKeyID(h string) string {
	_, cred, ok := strings.Cut(h, "Credential=")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(cred, "/")
	return id
}

// wire is the part of a DynamoDB request Guard reads.
type wire struct {
	TableName              string
	IndexName              string
	Key                    map[string]json.RawMessage
	Item                   map[string]json.RawMessage
	KeyConditionExpression string
	KeyConditions          map[string]struct {
		AttributeValueList []json.RawMessage
		ComparisonOperator string
	}
	ExpressionAttributeNames  map[string]string
	ExpressionAttributeValues map[string]json.RawMessage
	RequestItems              map[string]json.RawMessage
	TransactItems             []map[string]wire
}

// requests returns the authorizations IAM makes of operation op with
// body.
func (g *Guard) requests(op string, body []byte) ([]Request, error) {
	var w wire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, nil // the engine answers the malformed request
	}
	switch op {
	case "GetItem", "DeleteItem", "UpdateItem":
		return g.one("dynamodb:"+op, w.TableName, w.Key)
	case "PutItem":
		return g.one("dynamodb:"+op, w.TableName, w.Item)
	case "Query":
		t, err := g.table(w.TableName)
		if err != nil {
			return nil, err
		}
		hash := t.HashKey
		if w.IndexName != "" {
			hash = t.IndexHashKeys[w.IndexName]
		}
		key := queryKey(w, hash)
		if key == nil {
			// DynamoDB requires the partition key's equality: a form this
			// check cannot read is refused, not let through unchecked.
			return nil, fmt.Errorf("Query of %s: the partition key %s = value is not found in its key condition", w.TableName, hash)
		}
		return []Request{{Action: "dynamodb:Query", Table: t.LogicalID, Index: w.IndexName, LeadingKeys: key}}, nil
	case "Scan":
		t, err := g.table(w.TableName)
		if err != nil {
			return nil, err
		}
		return []Request{{Action: "dynamodb:Scan", Table: t.LogicalID, Index: w.IndexName}}, nil
	case "BatchGetItem", "BatchWriteItem":
		var out []Request
		for name, raw := range w.RequestItems {
			t, err := g.table(name)
			if err != nil {
				return nil, err
			}
			keys, err := batchKeys(op, raw, t.HashKey)
			if err != nil {
				return nil, err
			}
			out = append(out, Request{Action: "dynamodb:" + op, Table: t.LogicalID, LeadingKeys: keys})
		}
		return out, nil
	case "TransactWriteItems", "TransactGetItems":
		actions := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
		var out []Request
		for _, it := range w.TransactItems {
			for kind, x := range it {
				a, ok := actions[kind]
				if !ok {
					return nil, fmt.Errorf("%s: unknown action %s", op, kind)
				}
				key := x.Key
				if kind == "Put" {
					key = x.Item
				}
				rs, err := g.one("dynamodb:"+a, x.TableName, key)
				if err != nil {
					return nil, err
				}
				out = append(out, rs...)
			}
		}
		return out, nil
	}
	// The rest (DescribeTable, CreateTable, ...) name their table.
	t, err := g.table(w.TableName)
	if err != nil {
		return nil, err
	}
	return []Request{{Action: "dynamodb:" + op, Table: t.LogicalID}}, nil
}

// one is the authorization of a single-item action on table's item key.
func (g *Guard) one(action, table string, key map[string]json.RawMessage) ([]Request, error) {
	t, err := g.table(table)
	if err != nil {
		return nil, err
	}
	return []Request{{Action: action, Table: t.LogicalID, LeadingKeys: []string{stringValue(key[t.HashKey])}}}, nil
}

func (g *Guard) table(name string) (Table, error) {
	t, ok := g.tables[name]
	if !ok {
		return Table{}, fmt.Errorf("table %q is not one of the stack's", name)
	}
	return t, nil
}

// keyEquals matches one side of a key condition: a name or #placeholder
// compared with = to a :value.
var (
	keyEquals  = regexp.MustCompile(`^\(*\s*([#\w]+)\s*=\s*(:\w+)\s*\)*$`)
	valueFirst = regexp.MustCompile(`^\(*\s*(:\w+)\s*=\s*([#\w]+)\s*\)*$`)
)

// queryKey returns the partition key value of a Query's key condition
// whose partition key attribute is hash (nil when none is found), in
// either order of the equality.
func queryKey(w wire, hash string) []string {
	// guregu/dynamo sends the older KeyConditions form.
	if c, ok := w.KeyConditions[hash]; ok && c.ComparisonOperator == "EQ" && len(c.AttributeValueList) == 1 {
		return []string{stringValue(c.AttributeValueList[0])}
	}
	parts := regexp.MustCompile(`(?i)\s+and\s+`).Split(strings.TrimSpace(w.KeyConditionExpression), -1)
	for _, p := range parts {
		m := keyEquals.FindStringSubmatch(strings.TrimSpace(p))
		if m == nil {
			if m = valueFirst.FindStringSubmatch(strings.TrimSpace(p)); m == nil {
				continue
			}
			m[1], m[2] = m[2], m[1]
		}
		name := m[1]
		if strings.HasPrefix(name, "#") {
			name = w.ExpressionAttributeNames[name]
		}
		if name == hash {
			return []string{stringValue(w.ExpressionAttributeValues[m[2]])}
		}
	}
	return nil
}

// batchKeys returns the partition keys of a batch's requests on one
// table.
func batchKeys(op string, raw json.RawMessage, hash string) ([]string, error) {
	var keys []string
	if op == "BatchGetItem" {
		var g struct{ Keys []map[string]json.RawMessage }
		if err := json.Unmarshal(raw, &g); err != nil {
			return nil, fmt.Errorf("BatchGetItem: %w", err)
		}
		for _, k := range g.Keys {
			keys = append(keys, stringValue(k[hash]))
		}
		return keys, nil
	}
	var ws []struct {
		PutRequest    *struct{ Item map[string]json.RawMessage }
		DeleteRequest *struct{ Key map[string]json.RawMessage }
	}
	if err := json.Unmarshal(raw, &ws); err != nil {
		return nil, fmt.Errorf("BatchWriteItem: %w", err)
	}
	for _, w := range ws {
		switch {
		case w.PutRequest != nil:
			keys = append(keys, stringValue(w.PutRequest.Item[hash]))
		case w.DeleteRequest != nil:
			keys = append(keys, stringValue(w.DeleteRequest.Key[hash]))
		}
	}
	return keys, nil
}

// stringValue returns the string of an attribute value {"S": "..."}.
func stringValue(raw json.RawMessage) string {
	var v struct{ S string }
	_ = json.Unmarshal(raw, &v)
	return v.S
}
