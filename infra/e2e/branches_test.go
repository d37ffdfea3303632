package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// branchJSON is a message of GET .../messages with its place in the tree.
type branchJSON struct {
	messageJSON
	ParentID     *string  `json:"parentId"`
	SiblingIDs   []string `json:"siblingIds"`
	SiblingIndex *int     `json:"siblingIndex"`
}

// pathOf returns the current path of chat chatID (with query, e.g.
// "?leaf=..."); it fails the test unless the answer is 200.
func pathOf(t *testing.T, c *client, chatID, query string) []branchJSON {
	t.Helper()
	r := c.do("GET", "/api/chats/"+chatID+"/messages"+query, nil)
	if r.Status != 200 {
		t.Fatalf("messages of %s%s: %d %s", chatID, query, r.Status, r.Body)
	}
	var out struct {
		Data struct {
			Messages []branchJSON `json:"messages"`
		}
	}
	r.decode(t, &out)
	return out.Data.Messages
}

// ids returns the ids of a path.
func ids(path []branchJSON) []string {
	out := make([]string, len(path))
	for i, m := range path {
		out[i] = m.ID
	}
	return out
}

// expectPath checks the ids of path, each message's parent (the one
// before it) and its place among its siblings (sibs[i], the expected
// siblingIds of message i, nil meaning just itself).
func expectPath(t *testing.T, name string, path []branchJSON, want []string, sibs map[int][]string) {
	t.Helper()
	if !reflect.DeepEqual(ids(path), want) {
		t.Fatalf("%s: path %q, want %q", name, ids(path), want)
	}
	for i, m := range path {
		switch {
		case i == 0 && m.ParentID != nil:
			t.Errorf("%s: first message has parentId %q", name, *m.ParentID)
		case i > 0 && (m.ParentID == nil || *m.ParentID != path[i-1].ID):
			t.Errorf("%s: message %d has parentId %v, want %s", name, i, m.ParentID, path[i-1].ID)
		}
		s, ok := sibs[i]
		if !ok {
			s = []string{m.ID}
		}
		if !reflect.DeepEqual(m.SiblingIDs, s) || m.SiblingIndex == nil || m.SiblingIDs[*m.SiblingIndex] != m.ID {
			t.Errorf("%s: message %d siblings %q index %v, want %q", name, i, m.SiblingIDs, m.SiblingIndex, s)
		}
	}
}

// regenerate posts a JSON regenerate of messageID and returns the reply.
func regenerate(t *testing.T, c *client, chatID, messageID string, body any) messageJSON {
	t.Helper()
	r := c.do("POST", "/api/chats/"+chatID+"/messages/"+messageID+"/regenerate", body)
	if r.Status != 201 {
		t.Fatalf("regenerate %s: %d %s", messageID, r.Status, r.Body)
	}
	var out struct{ Data messageJSON }
	r.decode(t, &out)
	return out.Data
}

// words counts the words of s as the built-in model counts input.
func words(s string) int { return len(strings.Fields(s)) }

// TestChatBranches drives the message tree: an edit (a user message
// under a parent that has a reply) and a regenerate (JSON and streamed)
// each start a branch, GET .../messages answers the current path with
// siblings, ?leaf= switches and persists, the model sees only its path,
// and every bad input gets its 4xx with nothing written.
func TestChatBranches(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada, eve := newClient(t, srv.API), newClient(t, srv.API)
	adaID := signUpChatUser(t, ada, "ada.branches@example.com")
	signUpChatUser(t, eve, "eve.branches@example.com")
	chat := newChat(t, ada, map[string]any{"title": "Branches"})
	other := newChat(t, ada, map[string]any{"title": "Other"})
	evesChat := newChat(t, eve, map[string]any{})

	long := strings.Repeat("padding ", 50) + "question"
	e1 := sendMessage(t, ada, chat.ID, map[string]any{"content": "hello there", "modelId": "builtin"})
	e2 := sendMessage(t, ada, chat.ID, map[string]any{"content": long, "modelId": "builtin"})
	u1, a1, u2, a2 := e1.ID, e1.Response.ID, e2.ID, e2.Response.ID

	// Nothing branched: the list is every message, each its own only sibling.
	expectPath(t, "linear", pathOf(t, ada, chat.ID, ""), []string{u1, a1, u2, a2}, nil)

	// An edit: a new user message under a1, which has a reply already.
	e3 := sendMessage(t, ada, chat.ID, map[string]any{"content": "short one", "modelId": "builtin", "parentId": a1})
	u3, a3 := e3.ID, e3.Response.ID
	expectPath(t, "after the edit", pathOf(t, ada, chat.ID, ""), []string{u1, a1, u3, a3}, map[int][]string{2: {u2, u3}})
	// The model saw only the path: the system prompt, u1, a1 and u3, not
	// the long u2 nor its reply.
	system := e1.Response.InputTokens - words("hello there")
	if want := system + words("hello there") + words(e1.Response.Content) + words("short one"); e3.Response.InputTokens != want {
		t.Errorf("edited branch's reply read %d input tokens, want %d (its path only)", e3.Response.InputTokens, want)
	}

	// A regenerate of a3: a sibling reply, now current.
	r1 := regenerate(t, ada, chat.ID, a3, map[string]any{})
	if r1.Role != "assistant" || r1.ReplyTo != u3 || r1.ID == a3 || r1.Status != "completed" || r1.InputTokens != e3.Response.InputTokens {
		t.Errorf("regenerated reply %+v: want an assistant reply to %s with the same input", r1, u3)
	}
	expectPath(t, "after the regenerate", pathOf(t, ada, chat.ID, ""), []string{u1, a1, u3, r1.ID}, map[int][]string{2: {u2, u3}, 3: {a3, r1.ID}})

	// ?leaf= answers the path to that message and makes it current.
	expectPath(t, "leaf a2", pathOf(t, ada, chat.ID, "?leaf="+a2), []string{u1, a1, u2, a2}, map[int][]string{2: {u2, u3}})
	expectPath(t, "leaf kept", pathOf(t, ada, chat.ID, ""), []string{u1, a1, u2, a2}, map[int][]string{2: {u2, u3}})
	expectPath(t, "leaf mid-path", pathOf(t, ada, chat.ID, "?leaf="+strings.ToUpper(a1)), []string{u1, a1}, nil)

	// A message without parentId follows the current leaf (a1 now).
	e4 := sendMessage(t, ada, chat.ID, map[string]any{"content": "third way", "modelId": "builtin"})
	expectPath(t, "after a send on the leaf", pathOf(t, ada, chat.ID, ""), []string{u1, a1, e4.ID, e4.Response.ID}, map[int][]string{2: {u2, u3, e4.ID}})

	// parentId null: a new first message beside u1.
	e5 := sendMessage(t, ada, chat.ID, map[string]any{"content": "start over", "modelId": "builtin", "parentId": nil})
	expectPath(t, "a new root", pathOf(t, ada, chat.ID, ""), []string{e5.ID, e5.Response.ID}, map[int][]string{0: {u1, e5.ID}})

	// A streamed regenerate: the events of a stream, the old branch
	// current until it ends, the new reply current after.
	res := ada.readStream(ada.openRegenerate(context.Background(), chat.ID, e5.Response.ID, `{}`))
	if res.Status != 200 {
		t.Fatalf("streamed regenerate: %d %s", res.Status, res.Body)
	}
	rid, content := checkOrder(t, res.Events)
	if res.Events[len(res.Events)-1].Reason != "completed" || content == "" {
		t.Errorf("streamed regenerate ended %+v with %q", res.Events[len(res.Events)-1], content)
	}
	p := pathOf(t, ada, chat.ID, "")
	expectPath(t, "after the streamed regenerate", p, []string{e5.ID, rid}, map[int][]string{0: {u1, e5.ID}, 1: {e5.Response.ID, rid}})
	if p[1].Content != content || p[1].Status != "completed" {
		t.Errorf("streamed regenerate stored %q (%s), streamed %q", p[1].Content, p[1].Status, content)
	}

	before := ids(pathOf(t, ada, chat.ID, ""))
	msgs := "/api/chats/" + chat.ID + "/messages"
	regen := func(id string) string { return msgs + "/" + id + "/regenerate" }
	for _, tt := range []struct {
		name   string
		c      *client
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"parent of another chat", ada, "POST", "/api/chats/" + other.ID + "/messages", map[string]any{"content": "x", "parentId": a1}, 400, "INVALID_PARENT"},
		{"parent unknown", ada, "POST", msgs, map[string]any{"content": "x", "parentId": unknownUUID}, 400, "INVALID_PARENT"},
		{"parent a user message", ada, "POST", msgs, map[string]any{"content": "x", "parentId": u1}, 400, "INVALID_PARENT"},
		{"parent not a UUID", ada, "POST", msgs, map[string]any{"content": "x", "parentId": "a1"}, 400, "VALIDATION_FAILED"},
		{"parent a number", ada, "POST", msgs, map[string]any{"content": "x", "parentId": 7}, 400, "VALIDATION_FAILED"},
		{"parent on another user's chat", eve, "POST", msgs, map[string]any{"content": "x", "parentId": a1}, 403, "FORBIDDEN"},
		{"stream parent of another chat", ada, "POST", "/api/chats/" + other.ID + "/messages/stream",
			map[string]any{"content": "x", "modelId": "builtin", "userId": adaID, "parentId": a1}, 400, "INVALID_PARENT"},
		{"regenerate a user message", ada, "POST", regen(u1), nil, 400, "NOT_AN_ASSISTANT_MESSAGE"},
		{"regenerate unknown", ada, "POST", regen(unknownUUID), nil, 404, "MESSAGE_NOT_FOUND"},
		{"regenerate of another chat", ada, "POST", "/api/chats/" + other.ID + "/messages/" + a1 + "/regenerate", nil, 404, "MESSAGE_NOT_FOUND"},
		{"regenerate another user's", eve, "POST", regen(a1), nil, 403, "FORBIDDEN"},
		{"regenerate bad id", ada, "POST", regen("a1"), nil, 400, "INVALID_ID"},
		{"regenerate bad model", ada, "POST", regen(a1), map[string]any{"modelId": "nope"}, 400, "INVALID_MODEL"},
		{"regenerate bad body", ada, "POST", regen(a1), "[1]", 400, "INVALID_JSON"},
		{"regenerate in eve's chat", eve, "POST", "/api/chats/" + evesChat.ID + "/messages/" + a1 + "/regenerate", nil, 404, "MESSAGE_NOT_FOUND"},
		{"leaf unknown", ada, "GET", msgs + "?leaf=" + unknownUUID, nil, 404, "MESSAGE_NOT_FOUND"},
		{"leaf bad", ada, "GET", msgs + "?leaf=x", nil, 400, "VALIDATION_FAILED"},
		{"leaf of another user's chat", eve, "GET", msgs + "?leaf=" + a1, nil, 403, "FORBIDDEN"},
	} {
		expectError(t, tt.name, tt.c.do(tt.method, tt.path, tt.body), tt.status, tt.code)
	}
	if after := ids(pathOf(t, ada, chat.ID, "")); !reflect.DeepEqual(after, before) {
		t.Errorf("refused requests moved the path: %q, was %q", after, before)
	}
	if n := len(pathOf(t, ada, other.ID, "")); n != 0 {
		t.Errorf("refused requests wrote %d messages into the other chat", n)
	}
	// A path read up to a user message makes it the current leaf; a
	// message sent without parentId is then refused (a user message
	// follows a reply), and with its parentId goes where it says.
	expectPath(t, "leaf a user message", pathOf(t, ada, chat.ID, "?leaf="+e5.ID), []string{e5.ID}, map[int][]string{0: {u1, e5.ID}})
	expectError(t, "a send on a user message leaf", ada.do("POST", msgs, map[string]any{"content": "x", "modelId": "builtin"}), 400, "INVALID_PARENT")
	e6 := sendMessage(t, ada, chat.ID, map[string]any{"content": "after the reply", "modelId": "builtin", "parentId": e5.Response.ID})
	expectPath(t, "a send with parentId after it", pathOf(t, ada, chat.ID, ""), []string{e5.ID, e5.Response.ID, e6.ID, e6.Response.ID}, map[int][]string{0: {u1, e5.ID}, 1: {e5.Response.ID, rid}})
}

// TestChatBranchLimit fills one parent with the most replies it may have
// and checks that one more edit and one more regenerate are refused with
// 409 TOO_MANY_BRANCHES, storing nothing.
func TestChatBranchLimit(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "RATE_LIMIT_MESSAGES=0")
	ada := newClient(t, srv.API)
	signUpChatUser(t, ada, "ada.branchlimit@example.com")
	chat := newChat(t, ada, map[string]any{})
	first := sendMessage(t, ada, chat.ID, map[string]any{"content": "root", "modelId": "builtin"})
	const maxSiblings = 100 // chat.MaxSiblings
	for i := 1; i < maxSiblings; i++ {
		sendMessage(t, ada, chat.ID, map[string]any{"content": fmt.Sprintf("edit %d", i), "modelId": "builtin", "parentId": nil})
	}
	p := pathOf(t, ada, chat.ID, "")
	if len(p[0].SiblingIDs) != maxSiblings {
		t.Fatalf("%d first messages, want %d", len(p[0].SiblingIDs), maxSiblings)
	}
	expectError(t, "edit over the limit", ada.do("POST", "/api/chats/"+chat.ID+"/messages", map[string]any{"content": "one more", "parentId": nil}), 409, "TOO_MANY_BRANCHES")
	// And replies to one user message.
	for i := 1; i < maxSiblings; i++ {
		regenerate(t, ada, chat.ID, first.Response.ID, nil)
	}
	expectError(t, "regenerate over the limit", ada.do("POST", "/api/chats/"+chat.ID+"/messages/"+first.Response.ID+"/regenerate", nil), 409, "TOO_MANY_BRANCHES")
	res := ada.readStream(ada.openRegenerate(context.Background(), chat.ID, first.Response.ID, `{}`))
	expectError(t, "streamed regenerate over the limit", res.response(), 409, "TOO_MANY_BRANCHES")
	p = pathOf(t, ada, chat.ID, "?leaf="+first.Response.ID)
	if len(p) != 2 || len(p[0].SiblingIDs) != maxSiblings || len(p[1].SiblingIDs) != maxSiblings {
		t.Errorf("after the refusals: path %q with %d and %d siblings, want %d each", ids(p), len(p[0].SiblingIDs), len(p[1].SiblingIDs), maxSiblings)
	}
}

// openRegenerate posts body to the regenerate of messageID as an SSE
// client does. The caller closes the response body.
func (c *client) openRegenerate(ctx context.Context, chatID, messageID, body string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/api/chats/"+chatID+"/messages/"+messageID+"/regenerate", strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("regenerate stream: %v", err)
	}
	return resp
}

// TestChatRegenerateFailureKeepsBranch regenerates a reply with a model
// that cannot answer (its provider refuses connections): the JSON
// regenerate fails with the model's error and stores nothing; the
// streamed one ends with an error event, its failed reply kept beside the
// old one (its content is what was streamed: nothing). Either way the old
// branch stays current, and the next regenerate with a model that answers
// takes over.
func TestChatRegenerateFailureKeepsBranch(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "OPENAI_BASE_URL=http://127.0.0.1:1", "OPENAI_MODELS=offline-model")
	ada := newClient(t, srv.API)
	signUpChatUser(t, ada, "ada.regenfail@example.com")
	chat := newChat(t, ada, map[string]any{})
	e1 := sendMessage(t, ada, chat.ID, map[string]any{"content": "hello there", "modelId": "builtin"})
	u1, a1 := e1.ID, e1.Response.ID
	offline := map[string]any{"modelId": "openai/offline-model"}

	r := ada.do("POST", "/api/chats/"+chat.ID+"/messages/"+a1+"/regenerate", offline)
	expectError(t, "JSON regenerate with a model that cannot answer", r, 503, "MODEL_UNAVAILABLE")
	expectPath(t, "after the failed JSON regenerate", pathOf(t, ada, chat.ID, ""), []string{u1, a1}, nil)

	res := ada.readStream(ada.openRegenerate(context.Background(), chat.ID, a1, `{"modelId": "openai/offline-model"}`))
	if res.Status != 200 || len(res.Events) < 3 {
		t.Fatalf("streamed regenerate: %d %s", res.Status, res.Body)
	}
	failed := res.Events[0].MessageID
	errEv, end := res.Events[len(res.Events)-2], res.Events[len(res.Events)-1]
	if res.Events[0].Type != "start" || errEv.Type != "error" || errEv.Error == "" || end.Type != "end" || end.Reason != "interrupted" {
		t.Fatalf("streamed regenerate events %+v: want start, then error and end interrupted", res.Events)
	}
	// The old branch is current; the failed reply is its sibling, and
	// reachable as a leaf.
	expectPath(t, "after the failed streamed regenerate", pathOf(t, ada, chat.ID, ""), []string{u1, a1}, map[int][]string{1: {a1, failed}})
	p := pathOf(t, ada, chat.ID, "?leaf="+failed)
	if p[1].Status != "failed" {
		t.Errorf("the failed reply is stored %q, want failed", p[1].Status)
	}
	// Back to a1, then a regenerate that answers becomes current.
	pathOf(t, ada, chat.ID, "?leaf="+a1)
	ok := regenerate(t, ada, chat.ID, a1, map[string]any{"modelId": "builtin"})
	expectPath(t, "after a regenerate that answers", pathOf(t, ada, chat.ID, ""), []string{u1, ok.ID}, map[int][]string{1: {a1, failed, ok.ID}})
}
