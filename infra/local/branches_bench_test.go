package local_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/infra/latency"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/store"
)

// branchedMessages is the branched chat's shape: 10 branches of 100
// messages (50 exchanges) each, 1,000 in all. The first starts the chat;
// each next one is an edit under the 25th reply of the one before, so the
// current path (to the last branch's end) runs through all ten: 9 x 50 +
// 100 = 550 messages.
const (
	branchCount    = 10
	branchMessages = 100
	branchFork     = 50 // messages of a branch before the next one forks
)

// BenchmarkListMessagesBranched measures GET /api/chats/{id}/messages in
// process on a chat of 1,000 messages in 10 branches (branchedMessages)
// against the same request on a chat of 1,000 messages that never
// branched (linear_1000, the floor: today's list), on the same store.
// Both read the chat's whole item collection (one Query, paged by
// DynamoDB's 1 MB); the branched one then builds the tree and answers its
// current path with every message's parentId and siblingIds.
// `ddbcalls/op` counts the request's DynamoDB calls (the session
// included), `path/op` the messages answered.
func BenchmarkListMessagesBranched(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	chats := store.NewChats(f.stack.DB, "data")
	t0 := time.Now().UTC().Add(-time.Hour)
	newChat := func(title string) chat.Chat {
		c := chat.Chat{ID: uuid.NewString(), UserID: f.userID, Title: title, CreatedAt: t0, UpdatedAt: t0}
		if err := chats.CreateChat(ctx, c); err != nil {
			b.Fatal(err)
		}
		return c
	}
	at := t0
	msg := func(c chat.Chat, role string, parent *string, n int) chat.Message {
		at = at.Add(time.Millisecond)
		content := "question number " + strconv.Itoa(n)
		model := ""
		if role == "assistant" {
			content, model = strings.Repeat("answer ", 30), "builtin"
		}
		return chat.Message{ID: uuid.NewString(), ChatID: c.ID, Role: role, Content: content, ModelID: model, ParentID: parent,
			Status: chat.StatusCompleted, CreatedAt: at}
	}

	linear := newChat("linear")
	var prev *string
	for i := 0; i < 1000; i += 2 {
		u := msg(linear, "user", prev, i)
		a := msg(linear, "assistant", &u.ID, i+1)
		if err := chats.AddMessages(ctx, linear, u, a); err != nil {
			b.Fatal(err)
		}
		prev = &a.ID
	}

	branched := newChat("branched")
	var fork *string // the reply the next branch forks under
	wantPath := 0
	for br := range branchCount {
		parent := fork
		for i := 0; i < branchMessages; i += 2 {
			u := msg(branched, "user", parent, br*branchMessages+i)
			a := msg(branched, "assistant", &u.ID, br*branchMessages+i+1)
			if err := chats.AddMessages(ctx, branched, u, a); err != nil {
				b.Fatal(err)
			}
			parent = &a.ID
			if i+2 == branchFork {
				fork = &a.ID
			}
		}
		if br < branchCount-1 {
			wantPath += branchFork
		} else {
			wantPath += branchMessages
		}
	}

	list := func(b *testing.B, c chat.Chat, want, branchedAt int) {
		var d []time.Duration
		f.counter.Reset()
		b.ReportAllocs()
		for b.Loop() {
			start := time.Now()
			rec := httptest.NewRecorder()
			f.stack.API.ServeHTTP(rec, f.request("GET", "/api/chats/"+c.ID+"/messages", ""))
			d = append(d, time.Since(start))
			var out struct {
				Data struct {
					Messages []struct {
						SiblingIDs []string `json:"siblingIds"`
					} `json:"messages"`
				} `json:"data"`
			}
			if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &out) != nil || len(out.Data.Messages) != want {
				b.Fatalf("status %d, %d messages, want %d", rec.Code, len(out.Data.Messages), want)
			}
			forks := 0
			for _, m := range out.Data.Messages {
				if len(m.SiblingIDs) > 1 {
					forks++
				}
			}
			if forks != branchedAt {
				b.Fatalf("%d messages of the path have siblings, want %d", forks, branchedAt)
			}
		}
		b.ReportMetric(float64(f.counter.Count())/float64(b.N), "ddbcalls/op")
		b.ReportMetric(float64(want), "path/op")
		latency.Report(b, d)
	}
	b.Run("linear_1000", func(b *testing.B) { list(b, linear, 1000, 0) })
	b.Run("10_branches_1000", func(b *testing.B) { list(b, branched, wantPath, branchCount-1) })
}
