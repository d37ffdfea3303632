package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkAccountErasure measures the erasure of a deleted account of
// ERASE_BENCH_CHATS chats (default 200), each with one exchange (a user
// message and the built-in model's reply), on the in-process stack: the
// sweep that erases it, its time, DynamoDB calls and write units (the
// embedded engine's ConsumedCapacity, by DynamoDB's rules). Each
// iteration builds its own account; only the erasure is timed.
func BenchmarkAccountErasure(b *testing.B) {
	chats := 200
	if v, err := strconv.Atoi(os.Getenv("ERASE_BENCH_CHATS")); err == nil && v > 0 {
		chats = v
	}
	f := newFixture(b)
	ctx := context.Background()
	var calls, writes, reads float64
	for i := range b.N {
		b.StopTimer()
		// A fresh account each iteration.
		rec := httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, httptest.NewRequest("POST", "/api/auth/sign-up/email",
			strings.NewReader(fmt.Sprintf(`{"email":"erase-%d@example.com","password":"bench-pass-1","name":"E"}`, i))))
		if rec.Code != 200 {
			b.Fatalf("sign-up: %d %s", rec.Code, rec.Body)
		}
		c := rec.Result().Cookies()[0]
		var su struct {
			Data struct{ User struct{ ID string } }
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &su)
		u := &fixture{stack: f.stack, cookie: c.Name + "=" + c.Value, userID: su.Data.User.ID}
		for range chats {
			rec := httptest.NewRecorder()
			f.stack.API.ServeHTTP(rec, u.request("POST", "/api/chats", `{"title":"erase"}`))
			var created struct{ Data struct{ ID string } }
			if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil || rec.Code != 201 {
				b.Fatalf("create chat: %d %s", rec.Code, rec.Body)
			}
			rec = httptest.NewRecorder()
			f.stack.API.ServeHTTP(rec, u.request("POST", "/api/chats/"+created.Data.ID+"/messages", `{"content":"hello there"}`))
			if rec.Code != 200 && rec.Code != 201 {
				b.Fatalf("message: %d %s", rec.Code, rec.Body)
			}
		}
		rec = httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, u.request("DELETE", "/api/users/"+u.userID, `{"password":"bench-pass-1"}`))
		if rec.Code != 202 {
			b.Fatalf("delete: %d %s", rec.Code, rec.Body)
		}
		f.counter.Reset()
		before := f.meter.Snapshot()
		b.StartTimer()
		if _, err := f.stack.Sweeper.Sweep(ctx); err != nil {
			b.Fatalf("sweep: %v", err)
		}
		b.StopTimer()
		used := f.meter.Snapshot().Sub(before)
		calls += float64(f.counter.Count())
		writes += used.WriteUnits
		reads += used.ReadUnits
		// The account is gone: its sign-in fails.
		rec = httptest.NewRecorder()
		f.stack.API.ServeHTTP(rec, u.request("GET", "/api/auth/session", ""))
		if rec.Code != 401 {
			b.Fatalf("session after erasure: %d", rec.Code)
		}
	}
	b.ReportMetric(calls/float64(b.N), "ddbcalls/op")
	b.ReportMetric(writes/float64(b.N), "ddbwriteunits/op")
	b.ReportMetric(reads/float64(b.N), "ddbreadunits/op")
	b.ReportMetric(float64(chats), "chats")
}
