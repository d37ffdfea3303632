package dynamolocal

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/truora/minidyn/interpreter"
	"github.com/truora/minidyn/interpreter/language"
	"github.com/truora/minidyn/server"
	"github.com/truora/minidyn/types"
)

func sv(s string) *types.Item { return &types.Item{S: &s} }
func nv(n string) *types.Item { return &types.Item{N: &n} }

func TestExprCacheBounds(t *testing.T) {
	t.Parallel()
	t.Run("count", func(t *testing.T) {
		t.Parallel()
		c := newExprCache(10, 1<<20)
		for i := range 25 {
			c.get(exprCondition, fmt.Sprintf("a = :v%d", i))
			if n, _ := c.stats(); n > 10 {
				t.Fatalf("after %d expressions the cache holds %d, bound 10", i+1, n)
			}
		}
		// The latest are kept, the first forgotten.
		if _, ok := c.m[exprKey{exprCondition, "a = :v24"}]; !ok {
			t.Error("the latest expression is not cached")
		}
		if _, ok := c.m[exprKey{exprCondition, "a = :v0"}]; ok {
			t.Error("the first expression is still cached beyond the bound")
		}
	})
	t.Run("bytes", func(t *testing.T) {
		t.Parallel()
		limit := 3 * exprCost(len("a = :v00"))
		c := newExprCache(1000, limit)
		for i := range 50 {
			c.get(exprCondition, fmt.Sprintf("a = :v%02d", i))
			if _, b := c.stats(); b > limit {
				t.Fatalf("after %d expressions the cache holds %d bytes, bound %d", i+1, b, limit)
			}
		}
		if n, _ := c.stats(); n != 3 {
			t.Errorf("cache holds %d expressions, want 3", n)
		}
		// One larger than the whole bound is parsed, not cached.
		big := "a = :v OR " + strings.Repeat("b = :v OR ", limit/64) + "c = :v"
		if pe := c.get(exprCondition, big); pe.cond == nil || len(pe.errs) != 0 {
			t.Fatalf("big expression parsed with %v", pe.errs)
		}
		if _, ok := c.m[exprKey{exprCondition, big}]; ok {
			t.Error("an expression over the byte bound was cached")
		}
	})
	t.Run("kinds apart", func(t *testing.T) {
		t.Parallel()
		c := newExprCache(10, 1<<20)
		if c.get(exprCondition, "a") == c.get(exprProjection, "a") {
			t.Error("a condition and a projection of the same text share a parse")
		}
		if c.get(exprUpdate, "SET a = :v") != c.get(exprUpdate, "SET a = :v") {
			t.Error("the same update expression is parsed twice")
		}
	})
}

// TestExprCostEstimate checks that exprCost does not underestimate what
// a parsed expression holds.
func TestExprCostEstimate(t *testing.T) {
	for _, e := range []struct {
		kind exprKind
		text string
	}{
		{exprCondition, "(attribute_exists(PK) AND #s = :v4 AND (attempt = :v5 OR (attribute_not_exists(attempt) AND :v6 = :v7)))"},
		{exprUpdate, "SET #s = :v0, steps = :v1, logSeq = :v3 ADD version :v2 REMOVE #e, completedAt"},
		{exprProjection, "a, b.c, d[0], #n"},
		{exprCondition, "a = :a"},
	} {
		var before, after runtime.MemStats
		const n = 200
		keep := make([]*parsedExpr, n)
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range keep {
			keep[i] = parseExpr(e.kind, e.text)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per := int(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(keep)
		if est := exprCost(len(e.text)); per > est {
			t.Errorf("%q holds %d bytes, estimated %d", e.text, per, est)
		}
	}
}

// TestCachedEvaluationMatchesMinidyn checks that the cached evaluations
// answer what minidyn's interpreter.Language answers, errors word for
// word.
func TestCachedEvaluationMatchesMinidyn(t *testing.T) {
	t.Parallel()
	empty := &types.Item{B: []byte{}} // minidyn cannot convert it
	items := []map[string]*types.Item{
		nil,
		{"PK": sv("p"), "status": sv("running"), "attempt": nv("1"), "n": nv("5"), "l": {L: []*types.Item{nv("1"), sv("x")}},
			"m": {M: map[string]*types.Item{"a": sv("b"), "c": {L: []*types.Item{nv("2")}}}}, "ss": {SS: []*string{new("a"), new("b")}}},
		{"PK": sv("p"), "status": sv("done"), "blob": empty},
		{"PK": sv("p"), "a.b": sv("dotted"), "a": {M: map[string]*types.Item{"b": sv("nested")}}},
	}
	values := map[string]*types.Item{":v": sv("running"), ":one": nv("1"), ":l": {L: []*types.Item{nv("9")}}, ":x": sv("b")}
	names := map[string]string{"#s": "status", "#m": "m", "#a": "a", "#ab": "a.b"}
	conditions := []string{
		"attribute_exists(PK) AND #s = :v AND (attempt = :one OR (attribute_not_exists(attempt) AND :one = :one))",
		"#s = :v", "n > :one", "size(l) = :one", "#m.a = :x", "contains(ss, :x)", "m.c[0] = :one", "#a.b = :x", "#ab = :x",
		"begins_with(#s, :x)", "attribute_not_exists(PK)", "NOT #s = :v", "#s IN (:v, :x)", "n BETWEEN :one AND :one",
		"#undeclared = :v", "#s = = :v", "", "(", "#s = :v AND", "size(#s) > :v",
	}
	for _, typ := range []interpreter.ExpressionType{interpreter.ExpressionTypeConditional, interpreter.ExpressionTypeFilter, interpreter.ExpressionTypeKey} {
		for _, expr := range conditions {
			for i, item := range items {
				in := item
				if in == nil {
					in = map[string]*types.Item{}
				}
				var lang interpreter.Language
				want, wantErr := lang.Match(interpreter.MatchInput{TableName: "t", Expression: expr, ExpressionType: typ, Item: in, Aliases: names, Attributes: values})
				got, err := evalCondition(typ, expr, names, values, item)
				if got != want || errText(err) != errText(wantErr) {
					t.Errorf("%s %q on item %d: got %v, %v; minidyn %v, %v", typ, expr, i, got, err, want, wantErr)
				}
			}
		}
	}
	updates := []string{
		"SET #s = :v, n = n + :one ADD attempt :one REMOVE ss", "SET l = list_append(l, :l)", "SET m.c[0] = :x", "SET #m.a = :x",
		"ADD n :one", "DELETE ss :x", "REMOVE m.c[0]", "SET x = if_not_exists(x, :one)", "SET #undeclared = :v", "SET = :v", "FOO a", "",
	}
	for _, expr := range updates {
		for i, item := range items {
			if item == nil {
				continue
			}
			wantItem, gotItem := cloneItemDeep(item), cloneItemDeep(item)
			var lang interpreter.Language
			wantErr := lang.Update(interpreter.UpdateInput{TableName: "t", Expression: expr, Item: wantItem, Attributes: values, Aliases: names})
			err := evalUpdate(expr, names, values, gotItem)
			if errText(err) != errText(wantErr) || (wantErr == nil && !reflect.DeepEqual(sortSets(gotItem), sortSets(wantItem))) {
				t.Errorf("update %q on item %d: got %s, %v; minidyn %s, %v", expr, i, mustJSON(encodeItem(gotItem)), err, mustJSON(encodeItem(wantItem)), wantErr)
			}
		}
	}
	for _, expr := range []string{"PK, #s", "m.c[0], l[1]", "#m.a, ss", "#undeclared", "a,,b", "#ab, #a.b"} {
		for i, item := range items {
			var lang interpreter.Language
			want, wantErr := lang.Project(interpreter.ProjectInput{Expression: expr, Item: item, Aliases: names})
			got, err := evalProjection(expr, names, item)
			if errText(err) != errText(wantErr) || !reflect.DeepEqual(sortSets(got), sortSets(want)) {
				t.Errorf("projection %q on item %d: got %v, %v; minidyn %v, %v", expr, i, got, err, want, wantErr)
			}
		}
	}
	for _, expr := range []string{"SET PK = :v", "SET #s = :v, PK = :v", "REMOVE PK", "SET m.PK = :v", "SET = :v", ""} {
		want := updateKeyError(expr, names)
		got := updateTargetsKey(expr, names, "PK", "SK")
		if errText(got) != errText(want) {
			t.Errorf("key update %q: got %v, minidyn %v", expr, got, want)
		}
	}
}

// errText is err's message with minidyn's rendering of an unconvertible
// value (%#v: its pointers' addresses) cut off.
func errText(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if i := strings.Index(s, "&types.Item{"); i >= 0 {
		s = s[:i]
	}
	return s
}

// sortSets sorts the members of item's sets (minidyn writes them in
// its maps' order) and returns item.
func sortSets(item map[string]*types.Item) map[string]*types.Item {
	var walk func(v *types.Item)
	walk = func(v *types.Item) {
		if v == nil {
			return
		}
		for _, ss := range [][]*string{v.SS, v.NS} {
			slices.SortFunc(ss, func(a, b *string) int { return strings.Compare(*a, *b) })
		}
		for _, e := range v.L {
			walk(e)
		}
		for _, e := range v.M {
			walk(e)
		}
	}
	for _, v := range item {
		walk(v)
	}
	return item
}

// cloneItemDeep copies an item and every value in it.
func cloneItemDeep(item map[string]*types.Item) map[string]*types.Item {
	b := appendStored(nil, item)
	out, err := decodeStored(b)
	if err != nil {
		panic(err)
	}
	return out
}

// TestCachedParseNotShared checks that one cached parse serves several
// evaluations without any of them seeing another's values: the same
// update on two items, list_append applied again to its own result, the
// item given to apply left as it was, the syntax tree unchanged.
func TestCachedParseNotShared(t *testing.T) {
	t.Parallel()
	sch := &schema{keys: keyPair{hash: "PK"}}
	u := updateInput{Key: map[string]*types.Item{"PK": sv("a")}, UpdateExpression: "SET l = list_append(l, :l), n = n + :one",
		conditional: conditional{ExpressionAttributeValues: map[string]*types.Item{":l": {L: []*types.Item{sv("new")}}, ":one": nv("1")}}}
	tree := exprs.get(exprUpdate, u.UpdateExpression).update.String()
	a := map[string]*types.Item{"PK": sv("a"), "l": {L: []*types.Item{sv("a0")}}, "n": nv("1")}
	b := map[string]*types.Item{"PK": sv("b"), "l": {L: []*types.Item{sv("b0"), sv("b1")}}, "n": nv("10")}
	aBefore, bBefore := mustJSON(encodeItem(a)), mustJSON(encodeItem(b))
	a1, _, err := u.apply(sch, a)
	if err != nil {
		t.Fatal(err)
	}
	b1, _, err := u.apply(sch, b)
	if err != nil {
		t.Fatal(err)
	}
	a2, _, err := u.apply(sch, a1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  map[string]*types.Item
		want string
	}{
		{"a once", a1, `{"PK":{"S":"a"},"l":{"L":[{"S":"a0"},{"S":"new"}]},"n":{"N":"2"}}`},
		{"b once", b1, `{"PK":{"S":"b"},"l":{"L":[{"S":"b0"},{"S":"b1"},{"S":"new"}]},"n":{"N":"11"}}`},
		{"a twice", a2, `{"PK":{"S":"a"},"l":{"L":[{"S":"a0"},{"S":"new"},{"S":"new"}]},"n":{"N":"3"}}`},
	} {
		if got := string(appendStored(nil, c.got)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if got := mustJSON(encodeItem(a)); string(got) != string(aBefore) {
		t.Errorf("apply changed its input item a: %s, was %s", got, aBefore)
	}
	if got := mustJSON(encodeItem(b)); string(got) != string(bBefore) {
		t.Errorf("apply changed its input item b: %s, was %s", got, bBefore)
	}
	if got := string(appendStored(nil, a1)); got != `{"PK":{"S":"a"},"l":{"L":[{"S":"a0"},{"S":"new"}]},"n":{"N":"2"}}` {
		t.Errorf("the second apply changed the first's result: %s", got)
	}
	if v := u.ExpressionAttributeValues[":l"]; len(v.L) != 1 || *v.L[0].S != "new" {
		t.Errorf("the update's values changed: %s", mustJSON(encodeAV(v)))
	}
	if got := exprs.get(exprUpdate, u.UpdateExpression).update.String(); got != tree {
		t.Errorf("evaluation changed the cached tree: %s, was %s", got, tree)
	}
}

// TestCachedParseConcurrentReaders evaluates the same cached condition,
// update and projection from several goroutines at once, on different
// items (run with -race).
func TestCachedParseConcurrentReaders(t *testing.T) {
	t.Parallel()
	names := map[string]string{"#s": "status"}
	values := map[string]*types.Item{":v": sv("running"), ":l": {L: []*types.Item{sv("x")}}, ":one": nv("1")}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				item := map[string]*types.Item{"PK": sv(fmt.Sprint(g)), "status": sv("running"), "l": {L: []*types.Item{nv(fmt.Sprint(i))}}, "n": nv(fmt.Sprint(g))}
				ok, err := evalCondition(interpreter.ExpressionTypeConditional, "#s = :v AND size(l) = :one", names, values, item)
				if err != nil || !ok {
					errc <- fmt.Errorf("condition: %v, %v", ok, err)
					return
				}
				up := maps.Clone(item)
				if err := evalUpdate("SET l = list_append(l, :l), n = n + :one", names, values, up); err != nil {
					errc <- err
					return
				}
				if len(up["l"].L) != 2 || *up["n"].N != fmt.Sprint(g+1) || len(item["l"].L) != 1 {
					errc <- fmt.Errorf("update of goroutine %d: %s from %s", g, appendStored(nil, up), appendStored(nil, item))
					return
				}
				p, err := evalProjection("PK, l[0]", nil, up)
				if err != nil || *p["PK"].S != fmt.Sprint(g) {
					errc <- fmt.Errorf("projection: %v, %v", p, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestWireDecodesAsRequestTypes checks that the item writes' requests
// decode through writeWire to what encoding/json makes of them with
// their own types, and fail with its errors.
func TestWireDecodesAsRequestTypes(t *testing.T) {
	t.Parallel()
	type txReq struct {
		TransactItems          []map[string]*txAction
		ReturnConsumedCapacity string
	}
	bodies := []string{
		string(checkpointBody("r", 3)),
		`{"TransactItems":[{"Put":{"TableName":"t","Item":{"PK":{"S":"a"},"l":{"L":[{"M":{"x":{"NULL":true}}}]}}}},{"Delete":null},null,{}]}`,
		`{"TransactItems":[{"Put":{"TableName":"t","Item":{"PK":{"s":"lower"}}}}]}`,
		`{"TransactItems":[{"Put":{"TableName":"t","Item":{"PK":{"S":"a"}},"item":{"SK":{"S":"b"}}}}]}`,
		`{"TransactItems":[{"Update":{"TableName":"t","Key":{"PK":{"S":5}}}}]}`,
		`{"TransactItems":[{"Update":{"TableName":5,"Key":{"PK":{"BOOL":"x"}}}}]}`,
		`{"TransactItems":[{"Put":{"Item":{"PK":{"B":"!!"}}}}]}`,
		`{"TransactItems":[{"Put":{"Item":{"PK":{"S":"a"}}}}]`,
		`{"TransactItems":[], "ReturnConsumedCapacity":"TOTAL"}`,
		`{"TransactItems":null}`, `[]`, `null`, `{"TransactItems":{}}`,
	}
	for _, body := range bodies {
		var want txReq
		wantErr := decodeRequest([]byte(body), &want)
		var got txReq
		err := decodeWrite([]byte(body), &got, func(w *txWire) {
			got.TransactItems, got.ReturnConsumedCapacity = w.actions(), w.ReturnConsumedCapacity
		})
		if errText(err) != errText(wantErr) || (wantErr == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v, %v", body, got, err, want, wantErr)
		}
	}
	// And through the handler: the same answers as before for requests
	// that do not decode.
	h := newHandler(server.NewServer())
	for _, c := range []struct{ op, body string }{
		{"PutItem", `{"TableName":"t","Item":{"PK":{"S":5}}}`},
		{"UpdateItem", `{"TableName":"t","Key":{"PK":{"BOOL":"x"}}}`},
		{"DeleteItem", `{"TableName":"t","Key":`},
		{"TransactWriteItems", `{"TransactItems":[{"Put":{"Item":{"PK":{"N":[]}}}}]}`},
		{"PutItem", `{"TableName":"t","Item":{"PK":{"S":"a"}},"Expected":{}}`},
		{"PutItem", `{"TableName":"t","Item":{"PK":{"S":"a"}},"\u0045xpected":{}}`},
		{"UpdateItem", `  {"TableName":"t","AttributeUpdates":{}}`},
	} {
		_, err := h.dispatch(context.Background(), c.op, []byte(c.body), "us-east-1")
		ae, ok := err.(*apiError)
		if !ok || ae.status != http.StatusBadRequest {
			t.Errorf("%s %s: %v, want a 400", c.op, c.body, err)
			continue
		}
		want := "SerializationException"
		if strings.Contains(c.body, "xpected") || strings.Contains(c.body, "AttributeUpdates") {
			want = "ValidationException"
		}
		if ae.typ != want {
			t.Errorf("%s %s: %v, want a %s", c.op, c.body, err, want)
		}
	}
}

func updateKeyError(expr string, names map[string]string) error {
	return language.ValidateUpdateExpressionDoesNotTargetPrimaryKey(expr, names, "PK", "SK")
}
