package dynamolocal

import (
	"bytes"
	"sync"

	"github.com/truora/minidyn/types"
)

// encodeStored is the DynamoDB JSON the layer keeps of an item and the
// snapshot holds: every value with its type, empty lists, maps and
// binaries included, without HTML escaping, attributes sorted.
// It never fails (the error is kept for its callers' sake). The bytes
// are exactly as long as the JSON (they are kept with the item: spare
// capacity would be memory held per stored item); they are written in a
// pooled buffer first.
func encodeStored(item map[string]*types.Item) ([]byte, error) {
	bp := encodeBufs.Get().(*[]byte)
	b := appendStored((*bp)[:0], item)
	out := bytes.Clone(b)
	if cap(b) <= 1<<20 { // a buffer grown by a rare large item is not kept
		*bp = b
		encodeBufs.Put(bp)
	}
	return out, nil
}

var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// outItem encodes an item for an answer as minidyn answered it, so that
// clients see what they always saw: an empty list, map, binary or set
// comes back as NULL (the SDK would read minidyn's {} as BOOL false).
// nil for a nil item.
func outItem(item map[string]*types.Item) map[string]any {
	if item == nil {
		return nil
	}
	out := make(map[string]any, len(item))
	for k, v := range item {
		out[k] = outAV(v)
	}
	return out
}

func outAV(v *types.Item) map[string]any {
	null := map[string]any{"NULL": true}
	switch {
	case v == nil:
		return null
	case v.S != nil:
		return map[string]any{"S": *v.S}
	case v.N != nil:
		return map[string]any{"N": *v.N}
	case v.BOOL != nil:
		return map[string]any{"BOOL": *v.BOOL}
	case len(v.B) > 0:
		return map[string]any{"B": v.B}
	case len(v.SS) > 0, len(v.NS) > 0, len(v.BS) > 0:
		return encodeAV(v)
	case len(v.L) > 0:
		l := make([]any, len(v.L))
		for i, e := range v.L {
			l[i] = outAV(e)
		}
		return map[string]any{"L": l}
	case len(v.M) > 0:
		return map[string]any{"M": outItem(v.M)}
	}
	return null
}

// keyItem is the key of item under names (the attributes it has).
func keyItem(item map[string]*types.Item, names ...string) map[string]*types.Item {
	k := make(map[string]*types.Item, len(names))
	for _, n := range names {
		if v, ok := item[n]; ok {
			k[n] = v
		}
	}
	return k
}

// av is the attribute value of a key value the index holds.
func (a scalar) av() *types.Item {
	raw := a.raw
	switch a.typ {
	case 'S':
		return &types.Item{S: &raw}
	case 'N':
		return &types.Item{N: &raw}
	case 'B':
		return &types.Item{B: []byte(raw)}
	}
	return nil
}
