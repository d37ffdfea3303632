package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// queryLimits is a proxy in front of the embedded engine that records the
// Limit of every Query it forwards (0: none, an unlimited read).
type queryLimits struct {
	mu     sync.Mutex
	limits []int64
}

func (q *queryLimits) record(r *http.Request) {
	if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".Query") {
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var in struct{ Limit int64 }
	_ = json.Unmarshal(body, &in)
	q.mu.Lock()
	q.limits = append(q.limits, in.Limit)
	q.mu.Unlock()
}

func (q *queryLimits) take() []int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.limits
	q.limits = nil
	return l
}

// TestListPagesFarOffsets lists chats and workflows with offsets up to the
// largest int through a proxy that sees every Query: the page past the end
// is empty with the right total, and every Query asks DynamoDB for a
// bounded number of items (before, offset+limit+1 overflowed into a
// negative limit, which the client sends as no limit: a read of the whole
// collection).
func TestListPagesFarOffsets(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	engineURL, err := url.Parse(storetest.Engine(t).URL)
	if err != nil {
		t.Fatal(err)
	}
	seen := &queryLimits{}
	rp := httputil.NewSingleHostReverseProxy(engineURL)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.record(r)
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	ctx := context.Background()
	viaProxy, err := store.Open(ctx, store.Options{Region: "us-east-1", Endpoint: proxy.URL})
	if err != nil {
		t.Fatal(err)
	}
	chats := store.NewChats(viaProxy, db.Data())
	workflows := store.NewWorkflows(viaProxy, db.Data())
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		at := t0.Add(time.Duration(i) * time.Minute)
		if err := chats.CreateChat(ctx, newChat("u1", at)); err != nil {
			t.Fatal(err)
		}
		if err := workflows.CreateWorkflow(ctx, newWorkflow("u1", at)); err != nil {
			t.Fatal(err)
		}
	}
	const bound = httpapi.MaxOffset + httpapi.MaxLimit + 1
	for _, offset := range []int{3, httpapi.MaxOffset, math.MaxInt - httpapi.MaxLimit - 1, math.MaxInt - 1, math.MaxInt} {
		page := paging.Page{Limit: httpapi.MaxLimit, Offset: offset}
		seen.take()
		cs, total, err := chats.ListChats(ctx, "u1", page, false)
		if err != nil || len(cs) != 0 || total != 3 {
			t.Errorf("ListChats offset %d: %d chats, total %d, err %v; want none, 3, nil", offset, len(cs), total, err)
		}
		ws, total, err := workflows.ListWorkflows(ctx, "u1", page)
		if err != nil || len(ws) != 0 || total != 3 {
			t.Errorf("ListWorkflows offset %d: %d workflows, total %d, err %v; want none, 3, nil", offset, len(ws), total, err)
		}
		limits := seen.take()
		if len(limits) == 0 {
			t.Fatalf("offset %d: the proxy saw no Query; the check would prove nothing", offset)
		}
		for _, l := range limits {
			if l < 1 || l > bound {
				t.Errorf("offset %d: a Query asked for Limit %d, want 1 to %d", offset, l, bound)
			}
		}
	}
}
