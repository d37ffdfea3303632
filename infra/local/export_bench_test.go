package local_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/export"
)

// BenchmarkAccountExportAndErasure measures, on the in-process stack with
// a data file (the blob store a folder, as the dev server's), an account
// of EXPORT_BENCH_CHATS chats (default 1,000), each with one exchange (a
// message and the built-in model's reply), and EXPORT_BENCH_MIB
// attachments of 1 MiB (default 100, one in each of the first chats):
//
//   - its export: the sweep that writes the zip (every item read from the
//     store a page at a time, every attachment streamed from the blob
//     store), its time (export-ns) and the Go heap's growth while it ran
//     over the heap before it (export-heap-MiB, sampled every 5 ms);
//     against the floor of the same attachments' bytes alone zipped into
//     a spooled file and put into the same store (floor-zip-ns,
//     floor-heap-MiB): export-x-floor and export-heap-x-floor;
//   - its erasure: the sweep of its first pass (erase-ns, erase-ddbcalls)
//     against an account with nothing erased the same way
//     (erase-floor-ns, erase-floor-ddbcalls): erase-x-floor; and its last
//     pass, LastPass later (lastpass-ddbcalls).
//
// Only the measured sweeps and the floor are timed; building the account
// is not.
func BenchmarkAccountExportAndErasure(b *testing.B) {
	chats, mibs := benchEnv("EXPORT_BENCH_CHATS", 1000), benchEnv("EXPORT_BENCH_MIB", 100)
	var ahead atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	f := newFixtureAt(b, clock, "DATA_FILE", filepath.Join(b.TempDir(), "bench.json"), "RATE_LIMIT_EXPORTS", "1000/h", "RATE_LIMIT_ATTACHMENTS", "1000000/m")
	ctx := context.Background()
	var m struct {
		exportNs, floorNs, exportHeap, floorHeap, zip      float64
		eraseNs, eraseCalls, floorEraseNs, floorEraseCalls float64
		lastPassCalls, floorLastPassCalls, eraseWriteUnits float64
	}
	for i := range b.N {
		b.StopTimer()
		u := signUp(b, f, fmt.Sprintf("export-%d@example.com", i))
		empty := signUp(b, f, fmt.Sprintf("export-empty-%d@example.com", i))
		var atts []string
		for c := range chats {
			chatID := u.post(b, "/api/chats", `{"title":"export"}`, 201)
			u.post(b, "/api/chats/"+chatID+"/messages", `{"content":"hello there, tell me about the weather"}`, 200, 201)
			if c < mibs {
				atts = append(atts, u.attach(b, chatID, c))
			}
		}

		// The floor: the attachments' bytes alone through the zip, the
		// spool file and the store's Put.
		floorNs, floorHeap := measureHeap(func() {
			tmp, err := os.CreateTemp(b.TempDir(), "floor-*.zip")
			if err != nil {
				b.Fatal(err)
			}
			a := export.NewArchive(tmp)
			for _, id := range atts {
				o, err := f.stack.Blobs.Get(ctx, attachment.Key(u.userID, id))
				if err != nil {
					b.Fatal(err)
				}
				err = a.Copy("attachments/"+id, o.Body)
				o.Body.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
			if err := a.Close(); err != nil {
				b.Fatal(err)
			}
			if _, err := tmp.Seek(0, 0); err != nil {
				b.Fatal(err)
			}
			if _, err := f.stack.Blobs.Put(ctx, "exports/floor/"+strconv.Itoa(i)+".zip", tmp, blob.PutOptions{ContentType: "application/zip", Size: a.Size()}); err != nil {
				b.Fatal(err)
			}
			tmp.Close()
		})

		var req struct{ Data struct{ ID string } }
		_ = json.Unmarshal([]byte(u.post(b, "/api/users/"+u.userID+"/exports", "", 202)), &req)
		b.StartTimer()
		exportNs, exportHeap := measureHeap(func() {
			if _, err := f.stack.Sweeper.Sweep(ctx); err != nil {
				b.Fatalf("export sweep: %v", err)
			}
		})
		b.StopTimer()
		var got struct {
			Data struct {
				Status string
				Size   int64
				Error  string
			}
		}
		_ = json.Unmarshal([]byte(u.get(b, "/api/users/"+u.userID+"/exports/"+req.Data.ID)), &got)
		if got.Data.Status != "completed" {
			b.Fatalf("export %+v", got.Data)
		}

		// Erasure: the empty account first (the floor), then the full one;
		// each one's last pass once its window passed.
		erase := func(x *benchUser) (float64, float64, float64) {
			x.deleteAccount(b)
			f.counter.Reset()
			before := f.meter.Snapshot()
			t0 := time.Now()
			b.StartTimer()
			if _, err := f.stack.Sweeper.Sweep(ctx); err != nil {
				b.Fatalf("erasure sweep: %v", err)
			}
			b.StopTimer()
			return float64(time.Since(t0)), float64(f.counter.Count()), f.meter.Snapshot().Sub(before).WriteUnits
		}
		lastPass := func() float64 {
			ahead.Add(int64(17 * time.Minute))
			f.counter.Reset()
			if _, err := f.stack.Sweeper.Sweep(ctx); err != nil {
				b.Fatalf("last pass: %v", err)
			}
			return float64(f.counter.Count())
		}
		floorEraseNs, floorEraseCalls, _ := erase(empty)
		floorLast := lastPass()
		eraseNs, eraseCalls, eraseWrites := erase(u)
		m.eraseWriteUnits += eraseWrites
		last := lastPass()

		m.exportNs += float64(exportNs)
		m.floorNs += float64(floorNs)
		m.exportHeap += exportHeap
		m.floorHeap += floorHeap
		m.zip += float64(got.Data.Size)
		m.eraseNs += eraseNs
		m.eraseCalls += eraseCalls
		m.floorEraseNs += floorEraseNs
		m.floorEraseCalls += floorEraseCalls
		m.lastPassCalls += last
		m.floorLastPassCalls += floorLast
	}
	n := float64(b.N)
	b.ReportMetric(m.exportNs/n, "export-ns")
	b.ReportMetric(m.floorNs/n, "floor-zip-ns")
	b.ReportMetric(m.exportNs/m.floorNs, "export-x-floor")
	b.ReportMetric(m.exportHeap/n, "export-heap-MiB")
	b.ReportMetric(m.floorHeap/n, "floor-heap-MiB")
	b.ReportMetric(m.exportHeap/max(m.floorHeap, 0.01), "export-heap-x-floor")
	b.ReportMetric(m.zip/n/(1<<20), "zip-MiB")
	b.ReportMetric(m.eraseNs/n, "erase-ns")
	b.ReportMetric(m.floorEraseNs/n, "erase-floor-ns")
	b.ReportMetric(m.eraseNs/m.floorEraseNs, "erase-x-floor")
	b.ReportMetric(m.eraseCalls/n, "erase-ddbcalls")
	b.ReportMetric(m.floorEraseCalls/n, "erase-floor-ddbcalls")
	b.ReportMetric(m.eraseWriteUnits/n, "erase-ddbwriteunits")
	b.ReportMetric(m.lastPassCalls/n, "lastpass-ddbcalls")
	b.ReportMetric(m.floorLastPassCalls/n, "lastpass-floor-ddbcalls")
	b.ReportMetric(float64(chats), "chats")
}

func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

// measureHeap runs fn and returns its duration and the growth of the Go
// heap in use while it ran (sampled every 5 ms) over the heap before it,
// in MiB.
func measureHeap(fn func()) (time.Duration, float64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	peak.Store(base)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				var s runtime.MemStats
				runtime.ReadMemStats(&s)
				if s.HeapInuse > peak.Load() {
					peak.Store(s.HeapInuse)
				}
			}
		}
	})
	t0 := time.Now()
	fn()
	d := time.Since(t0)
	close(stop)
	wg.Wait()
	return d, float64(peak.Load()-base) / (1 << 20)
}

// benchUser is a signed-up user of a fixture's stack.
type benchUser struct {
	f      *fixture
	cookie string
	userID string
}

func signUp(tb testing.TB, f *fixture, email string) *benchUser {
	tb.Helper()
	rec := httptest.NewRecorder()
	f.stack.API.ServeHTTP(rec, httptest.NewRequest("POST", "/api/auth/sign-up/email",
		strings.NewReader(`{"email":"`+email+`","password":"bench-pass-1","name":"E"}`)))
	if rec.Code != 200 {
		tb.Fatalf("sign-up: %d %s", rec.Code, rec.Body)
	}
	var su struct {
		Data struct{ User struct{ ID string } }
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &su)
	c := rec.Result().Cookies()[0]
	return &benchUser{f: f, cookie: c.Name + "=" + c.Value, userID: su.Data.User.ID}
}

func (u *benchUser) do(tb testing.TB, method, path, body string, want ...int) string {
	tb.Helper()
	rec := httptest.NewRecorder()
	f := &fixture{cookie: u.cookie}
	u.f.stack.API.ServeHTTP(rec, f.request(method, path, body))
	for _, w := range want {
		if rec.Code == w {
			return rec.Body.String()
		}
	}
	tb.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	return ""
}

// post returns the created resource's id for a 201 with one, else the
// body.
func (u *benchUser) post(tb testing.TB, path, body string, want ...int) string {
	tb.Helper()
	out := u.do(tb, "POST", path, body, want...)
	var created struct{ Data struct{ ID string } }
	if strings.HasSuffix(path, "/api/chats") && json.Unmarshal([]byte(out), &created) == nil {
		return created.Data.ID
	}
	return out
}

func (u *benchUser) get(tb testing.TB, path string) string {
	tb.Helper()
	return u.do(tb, "GET", path, "", 200)
}

// attach adds a ready attachment of 1 MiB of random text to chatID: its
// bytes are put into the blob store under the upload's key, as the
// signed PUT would, and its read settles it.
func (u *benchUser) attach(tb testing.TB, chatID string, n int) string {
	tb.Helper()
	raw := make([]byte, 3<<18) // base64: 1 MiB
	_, _ = rand.NewChaCha8([32]byte{byte(n), byte(n >> 8)}).Read(raw)
	data := []byte(base64.StdEncoding.EncodeToString(raw))
	out := u.do(tb, "POST", "/api/chats/"+chatID+"/attachments",
		fmt.Sprintf(`{"name":"file-%03d.txt","contentType":"text/plain","size":%d}`, n, len(data)), 201)
	var created struct{ Data struct{ ID string } }
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		tb.Fatal(err)
	}
	if _, err := u.f.stack.Blobs.Put(context.Background(), attachment.UploadKey(u.userID, created.Data.ID), bytes.NewReader(data),
		blob.PutOptions{ContentType: "text/plain", Size: int64(len(data))}); err != nil {
		tb.Fatal(err)
	}
	var got struct{ Data struct{ Status string } }
	_ = json.Unmarshal([]byte(u.get(tb, "/api/chats/"+chatID+"/attachments/"+created.Data.ID)), &got)
	if got.Data.Status != "ready" {
		tb.Fatalf("attachment %s: %s", created.Data.ID, got.Data.Status)
	}
	return created.Data.ID
}

func (u *benchUser) deleteAccount(tb testing.TB) {
	tb.Helper()
	u.do(tb, "DELETE", "/api/users/"+u.userID, `{"password":"bench-pass-1"}`, 202)
}
