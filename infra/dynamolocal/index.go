package dynamolocal

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/truora/minidyn/types"
)

// The layer keeps, per table, an ordered index of the keys of every item
// (and one per secondary index), updated after each successful write, so
// that a Query finds its page by binary search and reads only the items of
// that page from minidyn, by key, instead of the whole table. Items stay
// in minidyn; the index holds only key attributes.

// scalar is a key attribute value in a form that orders like DynamoDB:
// numbers numerically, strings and binaries bytewise.
type scalar struct {
	typ byte // 'S', 'N' or 'B'; 0 when absent or not a key type
	raw string
	num *big.Float // for N
}

func scalarOf(v *types.Item) scalar {
	switch {
	case v == nil:
		return scalar{}
	case v.S != nil:
		return scalar{typ: 'S', raw: *v.S}
	case v.N != nil:
		f, _, err := big.ParseFloat(*v.N, 10, 256, big.ToNearestEven)
		if err != nil {
			f = nil
		}
		return scalar{typ: 'N', raw: *v.N, num: f}
	case v.B != nil:
		return scalar{typ: 'B', raw: string(v.B)}
	}
	return scalar{}
}

// compareValue compares like DynamoDB's key conditions: numbers by value.
func (a scalar) compareValue(b scalar) int {
	if a.typ != b.typ {
		return cmp.Compare(a.typ, b.typ)
	}
	if a.typ == 'N' && a.num != nil && b.num != nil {
		return a.num.Cmp(b.num)
	}
	return strings.Compare(a.raw, b.raw)
}

// compareOrder is compareValue made total: minidyn keeps 1 and 1.0 apart,
// so equal numbers are ordered by their text.
func (a scalar) compareOrder(b scalar) int {
	if c := a.compareValue(b); c != 0 {
		return c
	}
	return strings.Compare(a.raw, b.raw)
}

// id identifies the value exactly (type and text).
func (a scalar) id() string {
	return string(a.typ) + strconv.Itoa(len(a.raw)) + ":" + a.raw
}

// row is one item in an ordered index.
type row struct {
	hash, rng  scalar // this index's key values (rng.typ 0 without a sort key)
	tHash, tRg scalar // the table's key values, which order index ties
	item       string // the item's identity (table key)
	index      string // the secondary index holding the row; "" for the table
	// key holds the attributes that identify the row in a
	// LastEvaluatedKey: the index's and the table's keys.
	key map[string]*types.Item
}

func (r *row) compare(o *row) int {
	if c := r.rng.compareOrder(o.rng); c != 0 {
		return c
	}
	if c := r.tHash.compareOrder(o.tHash); c != 0 {
		return c
	}
	return r.tRg.compareOrder(o.tRg)
}

// partition is the rows sharing a hash key value, in order.
type partition struct {
	hash scalar
	rows []*row
}

// ordered is the ordered index of a table or of one secondary index.
type ordered struct {
	keys  keyPair
	parts map[string]*partition // by hash id
	order []*partition          // by hash value, for Scan
}

func newOrdered(keys keyPair) *ordered {
	return &ordered{keys: keys, parts: map[string]*partition{}}
}

func (o *ordered) insert(r *row) {
	id := r.hash.id()
	p := o.parts[id]
	if p == nil {
		p = &partition{hash: r.hash}
		o.parts[id] = p
		i, _ := slices.BinarySearchFunc(o.order, p, func(a, b *partition) int { return a.hash.compareOrder(b.hash) })
		o.order = slices.Insert(o.order, i, p)
	}
	i, _ := slices.BinarySearchFunc(p.rows, r, (*row).compare)
	p.rows = slices.Insert(p.rows, i, r)
}

func (o *ordered) remove(r *row) {
	id := r.hash.id()
	p := o.parts[id]
	if p == nil {
		return
	}
	i, found := slices.BinarySearchFunc(p.rows, r, (*row).compare)
	for ; found && i < len(p.rows) && p.rows[i].compare(r) == 0; i++ {
		if p.rows[i].item == r.item {
			p.rows = slices.Delete(p.rows, i, i+1)
			break
		}
	}
	if len(p.rows) == 0 {
		delete(o.parts, id)
		if j, ok := slices.BinarySearchFunc(o.order, p, func(a, b *partition) int { return a.hash.compareOrder(b.hash) }); ok {
			o.order = slices.Delete(o.order, j, j+1)
		}
	}
}

// tableIndex is the ordered index of one table and of its secondary
// indexes.
type tableIndex struct {
	sch       *schema
	primary   *ordered
	secondary map[string]*ordered
	rows      map[string][]*row // item identity -> its rows (primary first)
}

func newTableIndex(sch *schema) *tableIndex {
	ti := &tableIndex{sch: sch, primary: newOrdered(sch.keys), secondary: map[string]*ordered{}, rows: map[string][]*row{}}
	for name, def := range sch.indexes {
		ti.secondary[name] = newOrdered(def.keys)
	}
	return ti
}

// itemID identifies an item by its table key.
func (ti *tableIndex) itemID(item map[string]*types.Item) string {
	id := scalarOf(item[ti.sch.keys.hash]).id()
	if ti.sch.keys.rng != "" {
		id += "|" + scalarOf(item[ti.sch.keys.rng]).id()
	}
	return id
}

// put records item (at least its key attributes), replacing the rows of
// the item with the same table key.
func (ti *tableIndex) put(item map[string]*types.Item) {
	id := ti.itemID(item)
	ti.drop(id)
	tk := ti.sch.keys
	tHash, tRg := scalarOf(item[tk.hash]), scalarOf(item[tk.rng])
	tableKey := map[string]*types.Item{}
	for _, n := range tk.names() {
		tableKey[n] = item[n]
	}
	rows := []*row{{hash: tHash, rng: tRg, tHash: tHash, tRg: tRg, item: id, key: tableKey}}
	ti.primary.insert(rows[0])
	for _, name := range ti.sch.indexOrder {
		keys := ti.sch.indexes[name].keys
		if !hasAll(item, keys.names()) {
			continue // sparse
		}
		h, r := scalarOf(item[keys.hash]), scalarOf(item[keys.rng])
		if h.typ == 0 || (keys.rng != "" && r.typ == 0) {
			continue
		}
		key := map[string]*types.Item{}
		for _, n := range slices.Concat(keys.names(), tk.names()) {
			key[n] = item[n]
		}
		rw := &row{hash: h, rng: r, tHash: tHash, tRg: tRg, item: id, index: name, key: key}
		ti.secondary[name].insert(rw)
		rows = append(rows, rw)
	}
	ti.rows[id] = rows
}

// delete forgets the item with key's table key.
func (ti *tableIndex) delete(key map[string]*types.Item) {
	ti.drop(ti.itemID(key))
}

func (ti *tableIndex) drop(id string) {
	rows, ok := ti.rows[id]
	if !ok {
		return
	}
	ti.primary.remove(rows[0])
	for _, r := range rows[1:] {
		ti.secondary[r.index].remove(r)
	}
	delete(ti.rows, id)
}

// has reports whether the index knows an item with key's table key.
func (ti *tableIndex) has(key map[string]*types.Item) bool {
	_, ok := ti.rows[ti.itemID(key)]
	return ok
}

func (ti *tableIndex) len() int { return len(ti.rows) }

// readIndex returns the table's index with h.lock held shared, building
// the index first if needed; unlock releases the lock. A non-nil reply is
// the backend's answer to a failed build (e.g. ResourceNotFoundException).
func (h *handler) readIndex(ctx context.Context, table string) (*tableIndex, func(), *reply) {
	for {
		h.lock.RLock()
		if ti := h.indexes[table]; ti != nil {
			return ti, h.lock.RUnlock, nil
		}
		h.lock.RUnlock()
		h.lock.Lock()
		_, rep := h.indexLocked(ctx, table)
		h.lock.Unlock()
		if rep != nil {
			return nil, nil, rep
		}
	}
}

// indexLocked returns the table's index, building it from a scan of the
// backend when the layer has none (at start, after a restore,
// after Engine.WithBackend or UpdateTable). Callers hold h.lock
// exclusively.
func (h *handler) indexLocked(ctx context.Context, table string) (*tableIndex, *reply) {
	if ti := h.indexes[table]; ti != nil {
		return ti, nil
	}
	sch, rep := h.schemaLocked(ctx, table)
	if rep != nil {
		return nil, rep
	}
	ti := newTableIndex(sch)
	// A plain Scan: a projection would make minidyn's interpreter fail on
	// items holding an empty binary.
	rep = h.call(ctx, "Scan", mustJSON(map[string]any{"TableName": table}))
	if rep.status != http.StatusOK {
		return nil, rep
	}
	var all struct{ Items []map[string]*types.Item }
	if err := json.Unmarshal(rep.body, &all); err != nil {
		return nil, errorReply(&apiError{status: http.StatusInternalServerError, typ: "InternalServerError",
			msg: fmt.Sprintf("decode backend scan of %s: %v", table, err)})
	}
	for _, item := range all.Items {
		ti.put(item)
	}
	h.indexes[table] = ti
	return ti, nil
}

// indexPut and indexDelete keep the table's index, if built, in step
// with a write the backend applied. Callers hold h.lock exclusively.
func (h *handler) indexPut(table string, item map[string]*types.Item) {
	if ti := h.indexes[table]; ti != nil {
		ti.put(item)
	}
}

func (h *handler) indexDelete(table string, key map[string]*types.Item) {
	if ti := h.indexes[table]; ti != nil {
		ti.delete(key)
	}
}
