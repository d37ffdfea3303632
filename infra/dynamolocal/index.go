package dynamolocal

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/truora/minidyn/core"
	"github.com/truora/minidyn/types"
)

// The layer keeps each table's items itself, once, with an ordered index
// of their keys (and one per secondary index), updated by each write, so
// that a write costs its item and its partition, and a Query finds its
// page by binary search and reads only the items of that page. minidyn
// keeps every table, empty, for its failure emulation and its table
// descriptions.

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

// row is one entry of an ordered index: an item's key values in the
// table or in one secondary index.
type row struct {
	hash, rng scalar // this index's key values (rng.typ 0 without a sort key)
	e         *entry // the item
}

func (r *row) compare(o *row) int {
	if c := r.rng.compareOrder(o.rng); c != 0 {
		return c
	}
	if c := r.e.primary.hash.compareOrder(o.e.primary.hash); c != 0 {
		return c
	}
	return r.e.primary.rng.compareOrder(o.e.primary.rng)
}

// entry is one stored item: its DynamoDB JSON, exactly as written (empty
// lists, maps and binaries keep their type), and its rows. The JSON is
// never changed in place: a write replaces the entry, so a reader holding
// one sees a consistent item.
type entry struct {
	primary   row    // the table's key values; primary.e is the entry itself
	id        string // the item's identity (schema.itemID)
	data      []byte
	secondary []row // by schema.indexOrder; e nil where the item is not in that index
	// size is the item's size (itemSize); plain tells that every one of
	// its attributes is a string, a number or a boolean, so that data is
	// also its answer (outItem changes only empty and composite values):
	// a Query or Scan answers it without decoding it.
	size  int
	plain bool
}

// isPlain reports whether every attribute of item is a string, a number
// or a boolean (see entry.plain).
func isPlain(item map[string]*types.Item) bool {
	for _, v := range item {
		if v == nil || (v.S == nil && v.N == nil && v.BOOL == nil) {
			return false
		}
	}
	return true
}

// item decodes the stored item; every call returns a new map the caller
// may change.
func (e *entry) item() (map[string]*types.Item, error) {
	item, err := decodeStored(e.data)
	if err != nil {
		return nil, fmt.Errorf("decode stored item %s: %w", e.id, err)
	}
	return item, nil
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
	n     int                   // rows
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
	r.hash = p.hash // one copy of the partition's key value
	i, _ := slices.BinarySearchFunc(p.rows, r, (*row).compare)
	p.rows = slices.Insert(p.rows, i, r)
	o.n++
}

// replace puts r in old's place, when both have the same key values (an
// item written again with the same keys in this index): no rows move.
// false when old is not there.
func (o *ordered) replace(old, r *row) bool {
	p := o.parts[old.hash.id()]
	if p == nil {
		return false
	}
	i, found := slices.BinarySearchFunc(p.rows, old, (*row).compare)
	for ; found && i < len(p.rows) && p.rows[i].compare(old) == 0; i++ {
		if p.rows[i] == old {
			r.hash = p.hash
			p.rows[i] = r
			return true
		}
	}
	return false
}

func (o *ordered) remove(r *row) {
	id := r.hash.id()
	p := o.parts[id]
	if p == nil {
		return
	}
	i, found := slices.BinarySearchFunc(p.rows, r, (*row).compare)
	for ; found && i < len(p.rows) && p.rows[i].compare(r) == 0; i++ {
		if p.rows[i] == r {
			p.rows = slices.Delete(p.rows, i, i+1)
			o.n--
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

// tableIndex is one table's items, held by the layer once (minidyn keeps
// the table empty), with the ordered index of the table and of each of
// its secondary indexes.
type tableIndex struct {
	sch       *schema
	keys      *core.Table // minidyn's key checks for this schema; holds no data
	primary   *ordered
	secondary map[string]*ordered
	items     map[string]*entry // by item identity
}

func newTableIndex(sch *schema) *tableIndex {
	ti := &tableIndex{sch: sch, keys: keyChecker(sch), primary: newOrdered(sch.keys), secondary: map[string]*ordered{}, items: map[string]*entry{}}
	for name, def := range sch.indexes {
		ti.secondary[name] = newOrdered(def.keys)
	}
	return ti
}

// keyChecker is a minidyn table with sch's key schema and attribute
// types and no data, asked only for its key checks, so that a key
// minidyn would refuse is refused with its message.
func keyChecker(sch *schema) *core.Table {
	t := core.NewTable("keys")
	pay := "PAY_PER_REQUEST"
	t.BillingMode = &pay
	var defs []*types.AttributeDefinition
	for name, typ := range sch.attrTypes {
		defs = append(defs, &types.AttributeDefinition{AttributeName: &name, AttributeType: &typ})
	}
	t.SetAttributeDefinition(defs)
	ks := []*types.KeySchemaElement{{AttributeName: sch.keys.hash, KeyType: "HASH"}}
	if sch.keys.rng != "" {
		ks = append(ks, &types.KeySchemaElement{AttributeName: sch.keys.rng, KeyType: "RANGE"})
	}
	if err := t.CreatePrimaryIndex(&types.CreateTableInput{KeySchema: ks}); err != nil {
		// A table whose key types the layer does not know (created behind
		// its back): the key names are enough for the checks that follow.
		t.KeySchema.HashKey, t.KeySchema.RangeKey = sch.keys.hash, sch.keys.rng
	}
	return t
}

// checkKey refuses a Key parameter (GetItem, UpdateItem, DeleteItem, a
// ConditionCheck...) as minidyn does: other attributes than the key's, a
// missing key attribute, a value of another type than the attribute
// definition's.
func (ti *tableIndex) checkKey(key map[string]*types.Item) error {
	if err := types.ValidateItemMap(key); err != nil {
		return validation("%s", err.Error())
	}
	if err := ti.keys.ValidatePrimaryKeyMap(key); err != nil {
		return validation("%s", err.Error())
	}
	return ti.checkItemKey(key)
}

// checkItemKey refuses an item whose key attributes minidyn refuses
// (missing, or of another type than their definition).
func (ti *tableIndex) checkItemKey(item map[string]*types.Item) error {
	if len(ti.sch.attrTypes) == 0 {
		return nil // key types unknown (see keyChecker)
	}
	if _, err := ti.keys.KeySchema.GetKey(ti.keys.AttributesDef, item); err != nil {
		return validation("%s", err.Error())
	}
	return nil
}

// itemID identifies an item by its table key.
func (s *schema) itemID(item map[string]*types.Item) string {
	id := scalarOf(item[s.keys.hash]).id()
	if s.keys.rng != "" {
		id += "|" + scalarOf(item[s.keys.rng]).id()
	}
	return id
}

// lookup returns the entry of the item with key's table key; nil if none.
func (ti *tableIndex) lookup(key map[string]*types.Item) *entry {
	return ti.items[ti.sch.itemID(key)]
}

// get returns the item with key's table key, decoded (a map the caller
// may change); nil if there is none.
func (ti *tableIndex) get(key map[string]*types.Item) (map[string]*types.Item, error) {
	e := ti.lookup(key)
	if e == nil {
		return nil, nil
	}
	return e.item()
}

// put stores item, replacing the item with the same table key.
func (ti *tableIndex) put(item map[string]*types.Item) error {
	data, err := encodeStored(item)
	if err != nil {
		return err
	}
	ti.putData(item, data)
	return nil
}

// putData stores item, whose DynamoDB JSON is data.
func (ti *tableIndex) putData(item map[string]*types.Item, data []byte) {
	tk := ti.sch.keys
	e := &entry{id: ti.sch.itemID(item), data: data, size: itemSize(item), plain: isPlain(item)}
	e.primary = row{hash: scalarOf(item[tk.hash]), rng: scalarOf(item[tk.rng]), e: e}
	old := ti.items[e.id]
	if old == nil || !ti.primary.replace(&old.primary, &e.primary) {
		ti.drop(e.id)
		old = nil
		ti.primary.insert(&e.primary)
	}
	for i, name := range ti.sch.indexOrder {
		keys := ti.sch.indexes[name].keys
		var was *row // the item's row in this index before this write
		if old != nil && old.secondary != nil && old.secondary[i].e != nil {
			was = &old.secondary[i]
		}
		h, r := scalarOf(item[keys.hash]), scalarOf(item[keys.rng])
		if h.typ == 0 || (keys.rng != "" && r.typ == 0) {
			if was != nil {
				ti.secondary[name].remove(was)
			}
			continue // sparse
		}
		if e.secondary == nil {
			e.secondary = make([]row, len(ti.sch.indexOrder))
		}
		e.secondary[i] = row{hash: h, rng: r, e: e}
		now := &e.secondary[i]
		if was != nil && was.hash.id() == h.id() && was.rng.id() == r.id() && ti.secondary[name].replace(was, now) {
			continue
		}
		if was != nil {
			ti.secondary[name].remove(was)
		}
		ti.secondary[name].insert(now)
	}
	ti.items[e.id] = e
}

// delete forgets the item with key's table key.
func (ti *tableIndex) delete(key map[string]*types.Item) {
	ti.drop(ti.sch.itemID(key))
}

func (ti *tableIndex) drop(id string) {
	e, ok := ti.items[id]
	if !ok {
		return
	}
	ti.primary.remove(&e.primary)
	for i := range e.secondary {
		if r := &e.secondary[i]; r.e != nil {
			ti.secondary[ti.sch.indexOrder[i]].remove(r)
		}
	}
	delete(ti.items, id)
}

func (ti *tableIndex) len() int { return len(ti.items) }

// counts returns the number of items of the table and of each secondary
// index, for DescribeTable's ItemCount; false if the layer has no such
// table.
func (h *handler) counts(table string) (int, map[string]int, bool) {
	h.lock.RLock()
	defer h.lock.RUnlock()
	ti := h.indexes[table]
	if ti == nil {
		return 0, nil, false
	}
	idx := map[string]int{}
	for name, o := range ti.secondary {
		idx[name] = o.n
	}
	return ti.len(), idx, true
}

// each calls fn with every entry in the table's key order.
func (ti *tableIndex) each(fn func(e *entry) error) error {
	for _, p := range ti.primary.order {
		for _, r := range p.rows {
			if err := fn(r.e); err != nil {
				return err
			}
		}
	}
	return nil
}

// rekey returns the table's items under a new schema (after UpdateTable
// added or removed an index).
func (ti *tableIndex) rekey(sch *schema) (*tableIndex, error) {
	out := newTableIndex(sch)
	err := ti.each(func(e *entry) error {
		item, err := e.item()
		if err != nil {
			return err
		}
		out.putData(item, e.data)
		return nil
	})
	return out, err
}

// readTable returns the table's items with h.lock held shared; unlock
// releases the lock. A non-nil reply is the backend's answer when the
// table does not exist (ResourceNotFoundException).
func (h *handler) readTable(ctx context.Context, table string) (*tableIndex, func(), *reply) {
	for {
		h.lock.RLock()
		if ti := h.indexes[table]; ti != nil {
			return ti, h.lock.RUnlock, nil
		}
		h.lock.RUnlock()
		h.lock.Lock()
		_, rep := h.tableLocked(ctx, table)
		h.lock.Unlock()
		if rep != nil {
			return nil, nil, rep
		}
	}
}

// tableLocked returns the table's items; a table minidyn has and the
// layer does not (created behind its back with Engine.WithBackend) starts
// empty. Callers hold h.lock exclusively.
func (h *handler) tableLocked(ctx context.Context, table string) (*tableIndex, *reply) {
	if ti := h.indexes[table]; ti != nil {
		return ti, nil
	}
	sch, rep := h.schemaLocked(ctx, table)
	if rep != nil {
		return nil, rep
	}
	ti := newTableIndex(sch)
	h.indexes[table] = ti
	return ti, nil
}

// reconcile brings the layer's tables in line with minidyn's after
// Engine.WithBackend or UpdateTable: a table minidyn no longer has is
// dropped with its items, one whose schema changed is re-keyed. Callers
// hold h.lock exclusively.
func (h *handler) reconcile(ctx context.Context) error {
	h.forgetSchemas()
	for name, ti := range h.indexes {
		sch, rep := h.schemaLocked(ctx, name)
		if rep != nil {
			delete(h.indexes, name)
			continue
		}
		if reflect.DeepEqual(sch, ti.sch) {
			ti.sch = sch
			continue
		}
		nti, err := ti.rekey(sch)
		if err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		h.indexes[name] = nti
	}
	return nil
}
