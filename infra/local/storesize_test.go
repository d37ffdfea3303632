package local_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/infra/latency"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/store"
)

// BenchmarkListChatsAtStoreSize measures GET /api/users/{id}/chats (a
// page of the user's ten chats) on the embedded store holding only the
// user's data (the floor) and holding 10,000 more items: other users'
// chats (with their counters) and messages. A Query's cost should follow
// its page, not the store.
func BenchmarkListChatsAtStoreSize(b *testing.B) {
	for _, size := range []int{0, 10000} {
		name := "empty_store"
		if size > 0 {
			name = fmt.Sprintf("%d_items", size)
		}
		b.Run(name, func(b *testing.B) {
			f := newFixture(b)
			ctx := context.Background()
			chats := store.NewChats(f.stack.DB, "data")
			t0 := time.Now().UTC()
			for i := range 9 {
				if err := chats.CreateChat(ctx, chat.Chat{ID: uuid.NewString(), UserID: f.userID, Title: fmt.Sprint("mine ", i), CreatedAt: t0, UpdatedAt: t0}); err != nil {
					b.Fatal(err)
				}
			}
			// 100 users x (1 counter + 10 chats x (1 chat + 9 messages)).
			for items := 0; items < size; {
				user := uuid.NewString()
				items++ // the user's chat counter
				for j := 0; j < 10 && items < size; j++ {
					c := chat.Chat{ID: uuid.NewString(), UserID: user, Title: "other", CreatedAt: t0, UpdatedAt: t0}
					if err := chats.CreateChat(ctx, c); err != nil {
						b.Fatal(err)
					}
					items++
					var msgs []chat.Message
					for k := 0; k < 9 && items < size; k++ {
						msgs = append(msgs, chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: "user", Content: strings.Repeat("words ", 20), CreatedAt: t0.Add(time.Duration(k) * time.Millisecond)})
						items++
					}
					if len(msgs) > 0 {
						if err := chats.AddMessages(ctx, c, msgs...); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			path := "/api/users/" + f.userID + "/chats?limit=10"
			var d []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				rec := httptest.NewRecorder()
				f.stack.API.ServeHTTP(rec, f.request("GET", path, ""))
				d = append(d, time.Since(start))
				if rec.Code != 200 || strings.Count(rec.Body.String(), `"userId"`) != 10 {
					b.Fatalf("status %d, %d chats: %s", rec.Code, strings.Count(rec.Body.String(), `"userId"`), rec.Body)
				}
			}
			latency.Report(b, d)
		})
	}
}
