package dynamolocal

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/truora/minidyn/types"
)

// randomItem is an item of every attribute type, nested, with strings
// that need escaping, non-ASCII text, invalid UTF-8 and empty values.
func randomItem(r *rand.Rand, depth int) map[string]*types.Item {
	item := map[string]*types.Item{}
	for range r.IntN(6) {
		item[randomString(r)] = randomAV(r, depth)
	}
	return item
}

var stringPieces = []string{"a", "Zz", "0", " ", "\"", "\\", "\n", "\t", "\x01", "\x7f", "<&>", "é", "日本", "\u2028", "\u2029", "\xff", "\xe2\x80", "😀", "/", "{}", "\\u0041", "\b", "\f", "\r", "\x1f", "[{\\\"id\\\":1}]"}

func randomString(r *rand.Rand) string {
	var b []byte
	for range r.IntN(5) {
		b = append(b, stringPieces[r.IntN(len(stringPieces))]...)
	}
	return string(b)
}

func randomAV(r *rand.Rand, depth int) *types.Item {
	s := func() *string { v := randomString(r); return &v }
	n := func() *string { v := strconv.Itoa(r.IntN(2000) - 1000); return &v }
	bin := func() []byte {
		b := make([]byte, r.IntN(5))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	kinds := 10
	if depth <= 0 {
		kinds = 8
	}
	switch r.IntN(kinds) {
	case 0:
		return &types.Item{S: s()}
	case 1:
		return &types.Item{N: n()}
	case 2:
		return &types.Item{B: bin()}
	case 3:
		v := r.IntN(2) == 0
		return &types.Item{BOOL: &v}
	case 4:
		v := true
		return &types.Item{NULL: &v}
	case 5:
		ss := []*string{}
		for range r.IntN(3) {
			ss = append(ss, s())
		}
		return &types.Item{SS: ss}
	case 6:
		ns := []*string{}
		for range r.IntN(3) {
			ns = append(ns, n())
		}
		return &types.Item{NS: ns}
	case 7:
		bs := [][]byte{}
		for range r.IntN(3) {
			bs = append(bs, bin())
		}
		return &types.Item{BS: bs}
	case 8:
		l := []*types.Item{}
		for range r.IntN(4) {
			l = append(l, randomAV(r, depth-1))
		}
		return &types.Item{L: l}
	default:
		return &types.Item{M: randomItem(r, depth-1)}
	}
}

// TestStoredJSONMatchesEncodingJSON checks that appendStored writes what
// encoding/json wrote of an item, byte for byte, and that decodeStored
// reads it (and anything json.Unmarshal reads) as json.Unmarshal does.
func TestStoredJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		item := randomItem(r, 3)
		want, err := marshalRaw(encodeItem(item))
		if err != nil {
			t.Fatal(err)
		}
		got := appendStored(nil, item)
		if !bytes.Equal(got, want) {
			t.Fatalf("item %d: appendStored\n got %s\nwant %s", i, got, want)
		}
		checkDecode(t, want)
	}
	// Forms the layer never writes, decoded as encoding/json decodes them.
	for _, in := range []string{
		`{}`, ` {"a":{"S":"x"}} `, `{"a":{"s":"x"}}`, `{"a":{"S":"x","N":"1"}}`, `{"a":{}}`, `{"a":null}`,
		`{"a":{"B":null}}`, `{"a":{"BS":[null,"AA=="]}}`, `{"a":{"L":[]},"a":{"S":"last"}}`, `{"a":{"NULL":false}}`,
		`{"a":{"S":"\u00e9\ud83d\ude00"}}`, `{"a":{"S":"\ud800 lone"}}`, `{"a":{"S":"a\/b\b\f\r\n\t\"\\"}}`, "{\"a\":{\"S\":\"\xff\\n\"}}", `{"\u0061":{"M":{"b":{"SS":[]}}}}`, `{"a":{"N":"1" }}`, `{"a":{"BOOL":true}}`,
	} {
		checkDecode(t, []byte(in))
	}
	for _, in := range []string{``, `null`, `[]`, `{"a":{"B":"!!"}}`, `{"a":{"S":"x"}`, `{"a":{"S":"x"}}x`, `{"a":{"BOOL":"true"}}`, "{\"a\":{\"S\":\"\x01\"}}"} {
		var want map[string]*types.Item
		wantErr := json.Unmarshal([]byte(in), &want)
		got, err := decodeStored([]byte(in))
		// On an error json.Unmarshal leaves what it decoded so far; the
		// layer reads only the error.
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("decodeStored(%q) = %v, %v; json.Unmarshal: %v, %v", in, got, err, want, wantErr)
		}
	}
}

func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	var want map[string]*types.Item
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("json.Unmarshal(%s): %v", data, err)
	}
	got, err := decodeStored(data)
	if err != nil {
		t.Fatalf("decodeStored(%s): %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeStored(%s):\n got %s\nwant %s", data, mustJSON(encodeItem(got)), mustJSON(encodeItem(want)))
	}
}

// FuzzDecodeStored checks decodeStored against json.Unmarshal on any
// input.
func FuzzDecodeStored(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		f.Add(appendStored(nil, randomItem(r, 2)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want map[string]*types.Item
		wantErr := json.Unmarshal(data, &want)
		got, err := decodeStored(data)
		if (err == nil) != (wantErr == nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("decodeStored(%q) = %v, %v; json.Unmarshal: %v, %v", data, got, err, want, wantErr)
		}
	})
}

// BenchmarkStoredItem compares, on a run's record as stored (about 3
// KB, its steps a JSON string), reading it with encoding/json and with
// decodeStored, and what a cache of decoded items would pay on a hit
// instead: a deep copy (its callers change the maps they get); and
// writing it with encoding/json and with appendStored.
func BenchmarkStoredItem(b *testing.B) {
	item := map[string]*types.Item{"PK": sv("RUN#f6175c56-20c2-465e-8159-200920a9fe23"), "SK": sv("RUN"), "status": sv("running"), "attempt": nv("1"),
		"version": nv("7"), "workflowId": sv("w"), "chatId": sv("c"), "userId": sv("u"), "GSI1PK": sv("USER#u"), "GSI1SK": sv("RUN#2026-12-02T16:35:35Z"),
		"definition": sv(string(mustJSON(map[string]any{"steps": []string{"a", "b"}, "pad": string(make([]byte, 300))}))), "steps": sv(checkpointSteps(4)), "logSeq": nv("9")}
	data := appendStored(nil, item)
	b.Logf("%d bytes", len(data))
	b.Run("decode/encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b, cpuTime())
		for b.Loop() {
			var m map[string]*types.Item
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/decodeStored", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b, cpuTime())
		for b.Loop() {
			if _, err := decodeStored(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/cache_hit_deep_copy", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b, cpuTime())
		for b.Loop() {
			deepCopy(item)
		}
	})
	b.Run("encode/encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b, cpuTime())
		for b.Loop() {
			if _, err := marshalRaw(encodeItem(item)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/appendStored", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b, cpuTime())
		for b.Loop() {
			encodeStored(item)
		}
	})
}

// reportCPU reports the process's CPU time since cpu0 per iteration
// (cpu-ns/op: steadier than ns/op on a loaded machine).
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// deepCopy copies item and every value in it, strings shared (they are
// immutable).
func deepCopy(item map[string]*types.Item) map[string]*types.Item {
	out := make(map[string]*types.Item, len(item))
	for k, v := range item {
		out[k] = deepCopyAV(v)
	}
	return out
}

func deepCopyAV(v *types.Item) *types.Item {
	if v == nil {
		return nil
	}
	c := *v
	if v.S != nil {
		s := *v.S
		c.S = &s
	}
	if v.N != nil {
		n := *v.N
		c.N = &n
	}
	if v.BOOL != nil {
		x := *v.BOOL
		c.BOOL = &x
	}
	if v.NULL != nil {
		x := *v.NULL
		c.NULL = &x
	}
	if v.B != nil {
		c.B = slices.Clone(v.B)
	}
	if v.L != nil {
		c.L = make([]*types.Item, len(v.L))
		for i, e := range v.L {
			c.L[i] = deepCopyAV(e)
		}
	}
	if v.M != nil {
		c.M = deepCopy(v.M)
	}
	if v.SS != nil {
		c.SS = slices.Clone(v.SS)
	}
	if v.NS != nil {
		c.NS = slices.Clone(v.NS)
	}
	if v.BS != nil {
		c.BS = slices.Clone(v.BS)
	}
	return &c
}
