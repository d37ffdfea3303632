package store_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/export"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// BenchmarkExportArchive measures the archive path of an export of 1,000
// chats (a JSON file of 20 messages each) and 100 MiB of attachments (100
// of 1 MiB, streamed from a folder blob store into the zip, the zip
// spooled to a file and put into another folder store): time per export
// and the peak heap while it runs (peak-heap-MiB, sampled every 5 ms).
// The stores' reads of the items are not in it (the sections make the
// chats up); the claim and finish are the real store's.
func BenchmarkExportArchive(b *testing.B) {
	db := storetest.New(b)
	s := store.NewExports(db.DB, db.Data())
	src, err := blob.NewFolder(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	dst, err := blob.NewFolder(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// Random bytes: attachments (images, PDFs) hardly compress.
	mib := make([]byte, 1<<20)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(mib)
	for i := range 100 {
		if _, err := blob.PutBytes(ctx, src, fmt.Sprintf("attachments/u/%03d", i), mib, "text/plain"); err != nil {
			b.Fatal(err)
		}
	}
	type message struct {
		ID, Role, Content string
		At                time.Time
	}
	msgs := make([]message, 20)
	for i := range msgs {
		msgs[i] = message{ID: fmt.Sprint(i), Role: "user", Content: string(bytes.Repeat([]byte("words "), 80)), At: time.Now()}
	}
	sections := []export.Section{
		{Name: "chats", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			for i := range 1000 {
				if err := a.JSON(fmt.Sprintf("chats/%04d/chat.json", i), map[string]any{"id": i, "messages": msgs}); err != nil {
					return err
				}
			}
			return nil
		}},
		{Name: "attachments", Write: func(ctx context.Context, uid string, a *export.Archive) error {
			for i := range 100 {
				o, err := src.Get(ctx, fmt.Sprintf("attachments/u/%03d", i))
				if err != nil {
					return err
				}
				err = a.Copy(fmt.Sprintf("attachments/%03d", i), o.Body)
				o.Body.Close()
				if err != nil {
					return err
				}
			}
			return nil
		}},
	}
	r := export.NewRunner(s, dst, nil, nil, b.TempDir(), sections...)
	svc := export.NewService(s, nil, nil)
	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	}()
	b.ResetTimer()
	for i := range b.N {
		uid := fmt.Sprintf("bench%d", i)
		e, err := svc.Request(auth.ActingFor(ctx, uid))
		if err != nil {
			b.Fatal(err)
		}
		if n, err := r.Sweep(ctx); err != nil || n != 1 {
			b.Fatalf("sweep = %d, %v", n, err)
		}
		got, err := s.Export(ctx, uid, e.ID)
		if err != nil || got.Status != export.Completed {
			b.Fatalf("export %+v, %v", got, err)
		}
		b.ReportMetric(float64(got.Size)/(1<<20), "zip-MiB")
	}
	b.StopTimer()
	close(stop)
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
}
