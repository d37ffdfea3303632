package dynamolocal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"time"
)

// tableInfo is what the layer remembers about a table: the parts of its
// CreateTable request minidyn does not describe, TTL, and the key schema.
type tableInfo struct {
	created    time.Time
	attrDefs   json.RawMessage
	billing    string
	throughput map[string]capacity // "" = table, else GSI name
	ttlAttr    string              // "" = TTL disabled
	schema     *schema             // cached key schema, nil until loaded
}

type capacity struct {
	ReadCapacityUnits  int64
	WriteCapacityUnits int64
}

type keyPair struct{ hash, rng string }

func (k keyPair) names() []string {
	if k.rng == "" {
		return []string{k.hash}
	}
	return []string{k.hash, k.rng}
}

type indexDef struct {
	keys       keyPair
	global     bool
	projection string   // ALL, KEYS_ONLY or INCLUDE
	include    []string // NonKeyAttributes for INCLUDE
}

type schema struct {
	keys       keyPair
	indexes    map[string]indexDef
	indexOrder []string          // index names, sorted
	attrTypes  map[string]string // attribute definitions: name -> S, N or B
}

type keyElem struct{ AttributeName, KeyType string }

func pairOf(elems []keyElem) keyPair {
	var k keyPair
	for _, e := range elems {
		if e.KeyType == "HASH" {
			k.hash = e.AttributeName
		} else {
			k.rng = e.AttributeName
		}
	}
	return k
}

// entry returns the table's info, creating it; callers hold h.mu.
func (h *handler) entry(table string) *tableInfo {
	info := h.tables[table]
	if info == nil {
		info = &tableInfo{throughput: map[string]capacity{}}
		h.tables[table] = info
	}
	return info
}

// forgetSchemas drops cached key schemas (after direct backend access).
func (h *handler) forgetSchemas() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, info := range h.tables {
		info.schema = nil
	}
}

// schema returns the table's key schema, asking the backend once. A non-nil
// reply is the backend's error answer (e.g. ResourceNotFoundException).
// The caller must not hold h.lock (see schemaLocked).
func (h *handler) schema(ctx context.Context, table string) (*schema, *reply) {
	if s := h.cachedSchema(table); s != nil {
		return s, nil
	}
	h.lock.RLock()
	defer h.lock.RUnlock()
	return h.schemaLocked(ctx, table)
}

func (h *handler) cachedSchema(table string) *schema {
	h.mu.Lock()
	defer h.mu.Unlock()
	if info := h.tables[table]; info != nil {
		return info.schema
	}
	return nil
}

// schemaLocked is schema for callers holding h.lock (shared or
// exclusive): the backend's table metadata only changes under the
// exclusive lock.
func (h *handler) schemaLocked(ctx context.Context, table string) (*schema, *reply) {
	if s := h.cachedSchema(table); s != nil {
		return s, nil
	}
	rep := h.call(ctx, "DescribeTable", mustJSON(map[string]string{"TableName": table}))
	if rep.status != http.StatusOK {
		return nil, rep
	}
	type index struct {
		IndexName  string
		KeySchema  []keyElem
		Projection struct {
			ProjectionType   string
			NonKeyAttributes []string
		}
	}
	var d struct {
		Table struct {
			KeySchema              []keyElem
			GlobalSecondaryIndexes []index
			LocalSecondaryIndexes  []index
		}
	}
	if err := json.Unmarshal(rep.body, &d); err != nil {
		return nil, errorReply(&apiError{status: http.StatusInternalServerError, typ: "InternalServerError",
			msg: fmt.Sprintf("decode backend DescribeTable of %s: %v", table, err)})
	}
	s := &schema{keys: pairOf(d.Table.KeySchema), indexes: map[string]indexDef{}, attrTypes: map[string]string{}}
	add := func(ixs []index, global bool) {
		for _, ix := range ixs {
			s.indexes[ix.IndexName] = indexDef{keys: pairOf(ix.KeySchema), global: global,
				projection: ix.Projection.ProjectionType, include: ix.Projection.NonKeyAttributes}
			s.indexOrder = append(s.indexOrder, ix.IndexName)
		}
	}
	add(d.Table.GlobalSecondaryIndexes, true)
	add(d.Table.LocalSecondaryIndexes, false)
	slices.Sort(s.indexOrder)
	h.mu.Lock()
	defer h.mu.Unlock()
	info := h.entry(table)
	var defs []struct{ AttributeName, AttributeType string }
	if json.Unmarshal(info.attrDefs, &defs) == nil {
		for _, d := range defs {
			s.attrTypes[d.AttributeName] = d.AttributeType
		}
	}
	info.schema = s
	return s, nil
}

// exists reports whether the backend knows the table.
func (h *handler) exists(ctx context.Context, table string) bool {
	return h.shared(ctx, "DescribeTable", mustJSON(map[string]string{"TableName": table})).status == http.StatusOK
}

// tableOp forwards CreateTable, UpdateTable, DeleteTable (journaled
// writes) and DescribeTable, records what the layer needs, and completes
// the table description.
func (h *handler) tableOp(ctx context.Context, op string, body []byte, region string) (*reply, error) {
	var in tableRequest
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	if op == "DescribeTable" {
		rep := h.shared(ctx, op, body)
		if rep.status != http.StatusOK {
			return rep, nil
		}
		return h.decorate(rep, "Table", "ACTIVE", region)
	}
	rep, err := h.write(func() (*reply, []record, error) {
		rep := h.call(ctx, op, body)
		if rep.status != http.StatusOK {
			return rep, nil, nil
		}
		h.tableMeta(op, &in)
		switch op {
		case "CreateTable":
			delete(h.indexes, in.TableName)
			if _, rep := h.tableLocked(ctx, in.TableName); rep != nil {
				return rep, nil, nil
			}
		case "UpdateTable":
			if err := h.reconcile(ctx); err != nil {
				return nil, nil, err
			}
		case "DeleteTable":
			delete(h.indexes, in.TableName)
		}
		rec := body
		if op == "CreateTable" && in.CreationDateTime == nil {
			var req map[string]json.RawMessage
			if json.Unmarshal(body, &req) == nil {
				h.mu.Lock()
				req["CreationDateTime"] = mustJSON(float64(h.tables[in.TableName].created.UnixMilli()) / 1000)
				h.mu.Unlock()
				rec = mustJSON(req)
			}
		}
		return rep, []record{{op, rec}}, nil
	})
	if err != nil || rep.status != http.StatusOK {
		return rep, err
	}
	field, status := "TableDescription", "ACTIVE"
	if op == "DeleteTable" {
		status = "DELETING"
	}
	return h.decorate(rep, field, status, region)
}

// tableRequest is the part of a CreateTable, UpdateTable, DeleteTable or
// DescribeTable request the layer remembers.
type tableRequest struct {
	TableName              string
	AttributeDefinitions   json.RawMessage
	BillingMode            string
	ProvisionedThroughput  *capacity
	GlobalSecondaryIndexes []struct {
		IndexName             string
		ProvisionedThroughput *capacity
	}
	// CreationDateTime is not a CreateTable parameter: the layer adds it
	// to the journaled request, so that a replay keeps the time.
	CreationDateTime *float64
}

// tableMeta records what the layer remembers of a table after a
// successful CreateTable, UpdateTable or DeleteTable.
func (h *handler) tableMeta(op string, in *tableRequest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch op {
	case "CreateTable":
		at := time.Now()
		if in.CreationDateTime != nil {
			at = time.UnixMilli(int64(*in.CreationDateTime * 1000))
		}
		info := &tableInfo{created: at, attrDefs: in.AttributeDefinitions, billing: in.BillingMode,
			throughput: map[string]capacity{}}
		if in.ProvisionedThroughput != nil {
			info.throughput[""] = *in.ProvisionedThroughput
		}
		for _, g := range in.GlobalSecondaryIndexes {
			if g.ProvisionedThroughput != nil {
				info.throughput[g.IndexName] = *g.ProvisionedThroughput
			}
		}
		h.tables[in.TableName] = info
	case "UpdateTable":
		info := h.entry(in.TableName)
		info.schema = nil
		if len(in.AttributeDefinitions) > 0 {
			info.attrDefs = mergeAttrDefs(info.attrDefs, in.AttributeDefinitions)
		}
		if in.BillingMode != "" {
			info.billing = in.BillingMode
		}
		if in.ProvisionedThroughput != nil {
			info.throughput[""] = *in.ProvisionedThroughput
		}
	case "DeleteTable":
		delete(h.tables, in.TableName)
	}
}

func mergeAttrDefs(old, add json.RawMessage) json.RawMessage {
	type def struct{ AttributeName, AttributeType string }
	var a, b []def
	_ = json.Unmarshal(old, &a)
	if json.Unmarshal(add, &b) != nil {
		return old
	}
	for _, d := range b {
		if !slices.ContainsFunc(a, func(x def) bool { return x.AttributeName == d.AttributeName }) {
			a = append(a, d)
		}
	}
	return mustJSON(a)
}

// decorate completes minidyn's table description in rep's field: status,
// ARNs, index statuses, and what the layer remembers from CreateTable.
func (h *handler) decorate(rep *reply, field, status, region string) (*reply, error) {
	dec := json.NewDecoder(bytes.NewReader(rep.body))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("decode backend table description: %w", err)
	}
	desc, _ := out[field].(map[string]any)
	if desc == nil {
		return rep, nil
	}
	dropEmpty(desc)
	name, _ := desc["TableName"].(string)
	arn := fmt.Sprintf("arn:aws:dynamodb:%s:000000000000:table/%s", region, name)
	desc["TableArn"], desc["TableStatus"] = arn, status
	h.mu.Lock()
	info := h.tables[name]
	var tput map[string]capacity
	if info != nil {
		tput = info.throughput
		desc["CreationDateTime"] = float64(info.created.UnixMilli()) / 1000
		if len(info.attrDefs) > 0 {
			desc["AttributeDefinitions"] = info.attrDefs
		}
		if info.billing != "" {
			desc["BillingModeSummary"] = map[string]string{"BillingMode": info.billing}
		}
	}
	h.mu.Unlock()
	throughput := func(c capacity) map[string]int64 {
		return map[string]int64{"ReadCapacityUnits": c.ReadCapacityUnits, "WriteCapacityUnits": c.WriteCapacityUnits, "NumberOfDecreasesToday": 0}
	}
	desc["ProvisionedThroughput"] = throughput(tput[""])
	n, perIndex, counted := h.counts(name)
	if counted {
		desc["ItemCount"] = n
	}
	for _, g := range asSlice(desc["GlobalSecondaryIndexes"]) {
		if g, ok := g.(map[string]any); ok {
			dropEmpty(g)
			idx, _ := g["IndexName"].(string)
			g["IndexArn"] = arn + "/index/" + idx
			if s, _ := g["IndexStatus"].(string); s == "" {
				g["IndexStatus"] = "ACTIVE"
			}
			g["ProvisionedThroughput"] = throughput(tput[idx])
			if counted {
				g["ItemCount"] = perIndex[idx]
			}
		}
	}
	for _, l := range asSlice(desc["LocalSecondaryIndexes"]) {
		if l, ok := l.(map[string]any); ok {
			dropEmpty(l)
			idx, _ := l["IndexName"].(string)
			l["IndexArn"] = arn + "/index/" + idx
			if counted {
				l["ItemCount"] = perIndex[idx]
			}
		}
	}
	return jsonReply(out)
}

// dropEmpty removes the null and "" fields minidyn's description carries.
func dropEmpty(m map[string]any) {
	for k, v := range m {
		if v == nil || v == "" {
			delete(m, k)
		}
	}
}

// updateTTL answers UpdateTimeToLive from the layer's memory. Like AWS it
// refuses to enable TTL twice or to disable it when it is not enabled.
func (h *handler) updateTTL(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		TableName               string
		TimeToLiveSpecification *struct {
			AttributeName string
			Enabled       *bool
		}
	}
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	spec := in.TimeToLiveSpecification
	if spec == nil || spec.AttributeName == "" || spec.Enabled == nil {
		return nil, validation("TimeToLiveSpecification with AttributeName and Enabled is required")
	}
	return h.write(func() (*reply, []record, error) {
		if h.call(ctx, "DescribeTable", mustJSON(map[string]string{"TableName": in.TableName})).status != http.StatusOK {
			return nil, nil, notFound(in.TableName)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		info := h.entry(in.TableName)
		switch {
		case *spec.Enabled && info.ttlAttr != "":
			return nil, nil, validation("TimeToLive is already enabled")
		case !*spec.Enabled && info.ttlAttr == "":
			return nil, nil, validation("TimeToLive is already disabled")
		case !*spec.Enabled && info.ttlAttr != spec.AttributeName:
			return nil, nil, validation("TimeToLive is enabled on attribute %s, not %s", info.ttlAttr, spec.AttributeName)
		case *spec.Enabled:
			info.ttlAttr = spec.AttributeName
		default:
			info.ttlAttr = ""
		}
		rep, err := jsonReply(map[string]any{"TimeToLiveSpecification": map[string]any{
			"AttributeName": spec.AttributeName, "Enabled": *spec.Enabled}})
		return rep, []record{{"UpdateTimeToLive", body}}, err
	})
}

// describeTTL answers DescribeTimeToLive from the layer's memory.
func (h *handler) describeTTL(ctx context.Context, body []byte) (*reply, error) {
	var in struct{ TableName string }
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	if !h.exists(ctx, in.TableName) {
		return nil, notFound(in.TableName)
	}
	h.mu.Lock()
	attr := h.entry(in.TableName).ttlAttr
	h.mu.Unlock()
	desc := map[string]string{"TimeToLiveStatus": "DISABLED"}
	if attr != "" {
		desc = map[string]string{"TimeToLiveStatus": "ENABLED", "AttributeName": attr}
	}
	return jsonReply(map[string]any{"TimeToLiveDescription": desc})
}

// listTables answers ListTables from the tables seen through the layer,
// checking each against the backend so tables removed behind its back
// (Backend.Reset) disappear.
func (h *handler) listTables(ctx context.Context, body []byte) (*reply, error) {
	var in struct {
		ExclusiveStartTableName string
		Limit                   *int
	}
	if err := decodeRequest(body, &in); err != nil {
		return nil, err
	}
	limit := 100
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > 100 {
			return nil, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 100", *in.Limit)
		}
		limit = *in.Limit
	}
	h.mu.Lock()
	known := maps.Clone(h.tables)
	h.mu.Unlock()
	live := make([]string, 0, len(known))
	for name, info := range known {
		if h.exists(ctx, name) {
			live = append(live, name)
			continue
		}
		h.mu.Lock()
		if h.tables[name] == info { // not re-created meanwhile
			delete(h.tables, name)
		}
		h.mu.Unlock()
	}
	sort.Strings(live)
	start := sort.Search(len(live), func(i int) bool { return live[i] > in.ExclusiveStartTableName })
	page := live[start:min(start+limit, len(live))]
	out := map[string]any{"TableNames": page}
	if start+limit < len(live) {
		out["LastEvaluatedTableName"] = page[len(page)-1]
	}
	return jsonReply(out)
}
