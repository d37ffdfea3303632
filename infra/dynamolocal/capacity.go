package dynamolocal

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/truora/minidyn/types"
)

// Consumed capacity. A request with ReturnConsumedCapacity TOTAL or
// INDEXES is answered with the capacity DynamoDB would have charged for
// it (minidyn reports none), computed from the sizes of the items as the
// layer computes them for the 400 KB limit (itemSize), by DynamoDB's
// documented rules:
//
//   - Reads: one unit per 4 KB of an item, rounded up, at least one;
//     half of it when eventually consistent; twice for a transactional
//     read (TransactGetItems). GetItem, BatchGetItem and TransactGetItems
//     count each item whole, even with a ProjectionExpression, and an
//     item that does not exist as one unit. Query and Scan add the sizes
//     of every item they evaluate (before the FilterExpression; an
//     index's items as the index projects them) and round the sum up to
//     4 KB, at least one unit.
//   - Writes: one unit per 1 KB of the larger of the item before and
//     after the write, rounded up, at least one (a DeleteItem of an item
//     that does not exist costs one). Each global secondary index adds
//     its own writes: a put of the new index entry when the item enters
//     the index, a delete of the old one when it leaves, both when an
//     index key attribute changes, one write of the larger entry when
//     only projected attributes change, nothing when the entry is
//     unchanged or the item is in the index neither before nor after.
//   - TransactWriteItems doubles every write, the indexes' included, and
//     charges a ConditionCheck as a write of the item it checks.
//
// Failed requests report nothing (DynamoDB's errors carry no
// ConsumedCapacity). The answer's shape is DynamoDB's: TOTAL gives
// TableName, CapacityUnits and ReadCapacityUnits or WriteCapacityUnits;
// INDEXES adds Table and GlobalSecondaryIndexes; BatchGetItem,
// BatchWriteItem and the transactions answer one entry per table.
// Without ReturnConsumedCapacity nothing is computed.

// capacityMode returns a request's ReturnConsumedCapacity: "TOTAL",
// "INDEXES" or "" (NONE or absent); another value is a
// ValidationException, as on AWS.
func capacityMode(body []byte) (string, error) {
	if !bytes.Contains(body, []byte(`"ReturnConsumedCapacity"`)) {
		return "", nil
	}
	var in struct{ ReturnConsumedCapacity string }
	if err := decodeRequest(body, &in); err != nil {
		return "", err
	}
	return checkCapacityMode(in.ReturnConsumedCapacity)
}

func checkCapacityMode(mode string) (string, error) {
	switch mode {
	case "", "NONE":
		return "", nil
	case "TOTAL", "INDEXES":
		return mode, nil
	}
	return "", validation("1 validation error detected: Value '%s' at 'returnConsumedCapacity' failed to satisfy constraint: "+
		"Member must satisfy enum value set: [INDEXES, TOTAL, NONE]", mode)
}

// units are read and write capacity units.
type units struct{ read, write float64 }

func (u units) total() float64 { return u.read + u.write }

// tableUsage is what one request consumed of one table and its indexes.
type tableUsage struct {
	table   units
	indexes map[string]*units
}

// usage is what one request consumed, per table in the order first used.
type usage struct {
	tables map[string]*tableUsage
	order  []string
}

func newUsage() *usage { return &usage{tables: map[string]*tableUsage{}} }

func (u *usage) of(table string) *tableUsage {
	t := u.tables[table]
	if t == nil {
		t = &tableUsage{indexes: map[string]*units{}}
		u.tables[table] = t
		u.order = append(u.order, table)
	}
	return t
}

func (t *tableUsage) index(name string) *units {
	x := t.indexes[name]
	if x == nil {
		x = &units{}
		t.indexes[name] = x
	}
	return x
}

// readUnits is the cost of reading size bytes (one item, or a Query's
// sum): 4 KB units, at least one, halved when eventually consistent.
func readUnits(size int, consistent bool) float64 {
	n := float64(max(1, (size+4095)/4096))
	if !consistent {
		n /= 2
	}
	return n
}

// writeUnits is the cost of writing an item of size bytes: 1 KB units,
// at least one.
func writeUnits(size int) float64 { return float64(max(1, (size+1023)/1024)) }

// read adds the read of one item (nil: not found) of table.
func (u *usage) read(table string, item map[string]*types.Item, consistent bool, factor float64) {
	u.of(table).table.read += factor * readUnits(itemSize(item), consistent)
}

// write adds a write of table's item that was before (nil: absent) and is
// after (nil: deleted), times factor (2 in a transaction), with the
// writes of sch's global secondary indexes.
func (u *usage) write(sch *schema, table string, before, after map[string]*types.Item, factor float64) {
	t := u.of(table)
	t.table.write += factor * writeUnits(max(itemSize(before), itemSize(after)))
	for _, name := range sch.indexOrder {
		def := sch.indexes[name]
		if !def.global {
			continue
		}
		if w := indexWrites(&def, sch.keys, before, after); w > 0 {
			t.index(name).write += factor * w
		}
	}
}

// indexWrites is the write units a write of an item costs the index def.
func indexWrites(def *indexDef, table keyPair, before, after map[string]*types.Item) float64 {
	keys := def.keys.names()
	in := func(item map[string]*types.Item) bool { return item != nil && hasAll(item, keys) }
	was, is := in(before), in(after)
	switch {
	case !was && !is:
		return 0
	case !was:
		return writeUnits(itemSize(def.project(after, table)))
	case !is:
		return writeUnits(itemSize(def.project(before, table)))
	}
	old, cur := def.project(before, table), def.project(after, table)
	for _, k := range keys {
		if !bytes.Equal(mustJSON(before[k]), mustJSON(after[k])) {
			return writeUnits(itemSize(old)) + writeUnits(itemSize(cur))
		}
	}
	// Projections of different sizes differ: only equal sizes need the
	// comparison of their encodings (a large item, a run's record with
	// its steps, is then not encoded twice per index on every write).
	so, sc := itemSize(old), itemSize(cur)
	if so == sc && bytes.Equal(mustJSON(old), mustJSON(cur)) {
		return 0
	}
	return writeUnits(max(so, sc))
}

// entries is u as DynamoDB's ConsumedCapacity entries, one per table.
func (u *usage) entries(mode string) []map[string]any {
	out := make([]map[string]any, 0, len(u.order))
	for _, name := range u.order {
		t := u.tables[name]
		all := t.table
		for _, x := range t.indexes {
			all.read += x.read
			all.write += x.write
		}
		e := map[string]any{"TableName": name}
		fill(e, all)
		if mode == "INDEXES" {
			tbl := map[string]any{}
			fill(tbl, t.table)
			e["Table"] = tbl
			if len(t.indexes) > 0 {
				gsis := map[string]any{}
				for _, ix := range slices.Sorted(mapsKeys(t.indexes)) {
					m := map[string]any{}
					fill(m, *t.indexes[ix])
					gsis[ix] = m
				}
				e["GlobalSecondaryIndexes"] = gsis
			}
		}
		out = append(out, e)
	}
	return out
}

func fill(m map[string]any, u units) {
	m["CapacityUnits"] = u.total()
	if u.read > 0 {
		m["ReadCapacityUnits"] = u.read
	}
	if u.write > 0 {
		m["WriteCapacityUnits"] = u.write
	}
}

// withUsage adds u to a successful reply as its ConsumedCapacity: a list
// for the operations that answer one entry per table, else the one entry.
// Nothing is added without mode.
func withUsage(rep *reply, u *usage, mode string, list bool) (*reply, error) {
	if mode == "" || rep == nil || rep.status != http.StatusOK {
		return rep, nil
	}
	out := map[string]json.RawMessage{}
	if len(rep.body) > 0 {
		if err := json.Unmarshal(rep.body, &out); err != nil {
			return nil, err
		}
	}
	entries := u.entries(mode)
	switch {
	case list:
		out["ConsumedCapacity"] = mustJSON(entries)
	case len(entries) > 0:
		out["ConsumedCapacity"] = mustJSON(entries[0])
	}
	return jsonReply(out)
}
