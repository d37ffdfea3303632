package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

type citationJSON struct {
	KnowledgeBaseID string  `json:"knowledgeBaseId"`
	DocumentID      string  `json:"documentId"`
	DocumentName    string  `json:"documentName"`
	ChunkID         string  `json:"chunkId"`
	Start           int     `json:"start"`
	End             int     `json:"end"`
	Score           float64 `json:"score"`
}

type kbChatJSON struct {
	ID               string   `json:"id"`
	KnowledgeBaseIDs []string `json:"knowledgeBaseIds"`
}

type citedMessageJSON struct {
	ID        string         `json:"id"`
	Role      string         `json:"role"`
	Content   string         `json:"content"`
	ToolCalls []toolCallJSON `json:"toolCalls"`
	Citations []citationJSON `json:"citations"`
}

// TestKnowledgeInChats: a document uploaded as an attachment, added to a
// knowledge base and indexed is cited by the replies of a chat that names
// the knowledge base, through POST .../messages and through the stream
// (the stored message), each citation's offsets holding the passage; the
// built-in model's knowledge_search call runs behind the tool gate and
// finds it; another user's knowledge base is 404 on create and PATCH,
// another user's chat 403, more than 5 ids or a repeat 400, exactly 5
// accepted, [] clears them; the tool refuses another user's knowledge
// base; adding documents is rate limited per user.
func TestKnowledgeInChats(t *testing.T) {
	t.Parallel()
	srv := durableServer(t, "ALLOWED_ORIGINS="+frontendOrigin, "RATE_LIMIT_KNOWLEDGE_DOCUMENTS=1/h")
	ada, bob := newClient(t, srv.API), newClient(t, srv.API)
	adaID := signUpChatUser(t, ada, "ada-kbchat@example.com")
	signUpChatUser(t, bob, "bob-kbchat@example.com")

	var md strings.Builder
	md.WriteString("# Handbook\n\n")
	for i := range 200 {
		fmt.Fprintf(&md, "Section %d covers ordinary matters of the office and its routines.\n", i)
	}
	secret := "The vacation policy grants twenty-seven paid days to every employee after probation."
	md.WriteString(secret + "\n")
	text := md.String()

	files := newChat(t, ada, map[string]any{"title": "files"})
	att := readyAttachment(t, ada, files.ID, "handbook.md", "text/markdown", []byte(text))
	kb := newKnowledgeBase(t, ada, "Company")
	doc := addDocument(t, ada, kb.ID, att.ID)
	if got := indexed(t, ada, kb.ID, doc.ID); got.Status != "ready" {
		t.Fatalf("document: %+v", got)
	}
	bobKB := newKnowledgeBase(t, bob, "Bob's")
	// Adding documents is rate limited per user (1 an hour here): the
	// second is 429, whatever its body; another user's first is not.
	expectError(t, "a second document within the hour", ada.do("POST", "/api/knowledge-bases/"+kb.ID+"/documents", map[string]any{"attachmentId": att.ID}), 429, "RATE_LIMITED")
	bobFiles := newChat(t, bob, map[string]any{"title": "bob's files"})
	addDocument(t, bob, bobKB.ID, readyAttachment(t, bob, bobFiles.ID, "bob.txt", "text/plain", []byte("bob's own notes")).ID)

	r := ada.do("POST", "/api/chats", map[string]any{"title": "ask the handbook", "knowledgeBaseIds": []string{strings.ToUpper(kb.ID)}})
	if r.Status != 201 {
		t.Fatalf("create chat with knowledgeBaseIds: %d %s", r.Status, r.Body)
	}
	var created struct{ Data kbChatJSON }
	r.decode(t, &created)
	if len(created.Data.KnowledgeBaseIDs) != 1 || created.Data.KnowledgeBaseIDs[0] != kb.ID {
		t.Fatalf("created chat: %s", r.Body)
	}
	chatID := created.Data.ID

	checkCited := func(name string, cs []citationJSON) {
		t.Helper()
		if len(cs) == 0 || len(cs) > 8 {
			t.Fatalf("%s: citations %+v, want 1-8", name, cs)
		}
		c := cs[0]
		if c.KnowledgeBaseID != kb.ID || c.DocumentID != doc.ID || c.DocumentName != "handbook.md" || !strings.HasPrefix(c.ChunkID, doc.ID+":") {
			t.Fatalf("%s: first citation %+v", name, c)
		}
		if c.Start < 0 || c.End > len(text) || c.Start >= c.End || !strings.Contains(text[c.Start:c.End], "twenty-seven") {
			t.Fatalf("%s: first citation's bytes [%d:%d] do not hold the passage", name, c.Start, c.End)
		}
	}

	// POST .../messages: the reply carries citations, and so does the
	// stored message.
	r = ada.do("POST", "/api/chats/"+chatID+"/messages", map[string]any{"content": "How many vacation days do employees get?", "modelId": "builtin"})
	if r.Status != 201 {
		t.Fatalf("send: %d %s", r.Status, r.Body)
	}
	var sent struct {
		Data struct {
			Response citedMessageJSON `json:"response"`
		}
	}
	r.decode(t, &sent)
	checkCited("sent reply", sent.Data.Response.Citations)

	// The stream: the stored reply carries them.
	res := ada.stream(chatID, map[string]any{"content": "vacation days after probation?", "modelId": "builtin", "userId": adaID})
	if res.Status != 200 || len(res.Events) == 0 || res.Events[len(res.Events)-1].Reason != "completed" {
		t.Fatalf("stream: %d %s %+v", res.Status, res.Body, res.Events)
	}
	streamedID := res.Events[0].MessageID
	msgs := citedMessages(t, ada, chatID)
	var streamed *citedMessageJSON
	for i := range msgs {
		if msgs[i].ID == streamedID {
			streamed = &msgs[i]
		}
		if msgs[i].Role == "user" && len(msgs[i].Citations) > 0 {
			t.Fatalf("a user message with citations: %+v", msgs[i])
		}
	}
	if streamed == nil {
		t.Fatalf("streamed reply %s not in the messages", streamedID)
	}
	checkCited("streamed reply", streamed.Citations)
	// The stream's end carries the citations, the same as stored; so do
	// a regenerate's stream and a resume after the end (the logged end).
	sameCitations := func(name string, end streamEvent, stored []citationJSON) {
		t.Helper()
		if end.Type != "end" || !slices.Equal(end.Citations, stored) {
			t.Fatalf("%s: end event %+v with citations %+v, want the stored message's %+v", name, end, end.Citations, stored)
		}
	}
	sameCitations("stream", res.Events[len(res.Events)-1], streamed.Citations)
	replay := ada.resume(chatID, res.Events[len(res.Events)-2].ID, false)
	if replay.Status != 200 || len(replay.Events) != 1 {
		t.Fatalf("resume before the end: %d %s %+v", replay.Status, replay.Body, replay.Events)
	}
	sameCitations("resumed stream", replay.Events[0], streamed.Citations)
	regen := ada.readStream(ada.openRegenerate(context.Background(), chatID, streamedID, `{"modelId": "builtin"}`))
	if regen.Status != 200 || len(regen.Events) < 2 || regen.Events[len(regen.Events)-1].Reason != "completed" {
		t.Fatalf("regenerate stream: %d %s %+v", regen.Status, regen.Body, regen.Events)
	}
	var regenerated *citedMessageJSON
	for _, m := range citedMessages(t, ada, chatID) {
		if m.ID == regen.Events[0].MessageID {
			regenerated = &m
		}
	}
	if regenerated == nil {
		t.Fatalf("regenerated reply %s not in the messages", regen.Events[0].MessageID)
	}
	checkCited("regenerated reply", regenerated.Citations)
	sameCitations("regenerate stream", regen.Events[len(regen.Events)-1], regenerated.Citations)
	// A chat without knowledge bases: its end has none.
	bare := ada.stream(plainChat(t, ada), map[string]any{"content": "vacation days after probation?", "modelId": "builtin", "userId": adaID})
	if bare.Status != 200 || len(bare.Events) < 2 || len(bare.Events[len(bare.Events)-1].Citations) != 0 {
		t.Fatalf("stream of a chat without knowledge bases: %d %+v", bare.Status, bare.Events)
	}

	// knowledge_search, called by the built-in model, runs behind the
	// gate for the caller: the caller's knowledge base answers, another
	// user's is refused as not found.
	call := fmt.Sprintf(`knowledge_search {"knowledgeBaseId": %q, "query": "vacation policy paid days", "topK": 2}`, kb.ID)
	reply := sendCited(t, ada, chatID, call)
	if len(reply.ToolCalls) != 1 || reply.ToolCalls[0].ToolName != "knowledge_search" || !strings.Contains(string(reply.ToolCalls[0].Result), "twenty-seven") {
		t.Fatalf("knowledge_search call: %+v", reply.ToolCalls)
	}
	var found struct {
		Results []knowledgeResultJSON `json:"results"`
	}
	if err := json.Unmarshal(reply.ToolCalls[0].Result, &found); err != nil || len(found.Results) == 0 || len(found.Results) > 2 || found.Results[0].DocumentID != doc.ID {
		t.Fatalf("knowledge_search result: %s", reply.ToolCalls[0].Result)
	}
	call = fmt.Sprintf(`knowledge_search {"knowledgeBaseId": %q, "query": "anything"}`, bobKB.ID)
	reply = sendCited(t, ada, chatID, call)
	if len(reply.ToolCalls) != 1 || !strings.Contains(string(reply.ToolCalls[0].Result), `"error"`) || strings.Contains(string(reply.ToolCalls[0].Result), "results") {
		t.Fatalf("knowledge_search of another user's knowledge base: %+v", reply.ToolCalls)
	}

	// knowledge_search as a workflow step and as an agent step's call:
	// the run's user's knowledge base answers; another user's fails the
	// step as not found.
	run := runSteps(t, ada, adaID, plainChat(t, ada), fmt.Sprintf(`[{"id":"find","toolId":"knowledge_search","inputs":{"knowledgeBaseId":%q,"query":"vacation policy","topK":1}}]`, kb.ID))
	if run.Status != "completed" || !strings.Contains(string(run.Steps[0].Output), "twenty-seven") {
		t.Fatalf("knowledge_search step: %+v", run)
	}
	var stepOut struct {
		Results []knowledgeResultJSON `json:"results"`
	}
	if err := json.Unmarshal(run.Steps[0].Output, &stepOut); err != nil || len(stepOut.Results) != 1 || stepOut.Results[0].DocumentID != doc.ID {
		t.Fatalf("knowledge_search step output: %s", run.Steps[0].Output)
	}
	// A step's knowledge_search ranks as the chats do, by the hybrid
	// (vectors fused with BM25 by rank): for the streamed message's
	// words, the same chunks with the same scores as the knowledge
	// base's query and, as far as it goes, the streamed reply's
	// citations. BM25 alone would score no chunk above 1/(RRFK+1): a
	// chunk ranked by both sides does.
	const asked = "vacation days after probation?"
	hybrid := queryKnowledge(t, ada, kb.ID, map[string]any{"query": asked, "topK": 8})
	run = runSteps(t, ada, adaID, plainChat(t, ada), fmt.Sprintf(`[{"id":"find","toolId":"knowledge_search","inputs":{"knowledgeBaseId":%q,"query":%q,"topK":8}}]`, kb.ID, asked))
	stepOut.Results = nil
	if run.Status != "completed" || json.Unmarshal(run.Steps[0].Output, &stepOut) != nil {
		t.Fatalf("knowledge_search step (hybrid): %+v", run)
	}
	type ranked struct {
		chunk string
		score float64
	}
	rankOf := func(rs []knowledgeResultJSON) []ranked {
		out := make([]ranked, len(rs))
		for i, r := range rs {
			out[i] = ranked{r.ChunkID, r.Score}
		}
		return out
	}
	if got, want := rankOf(stepOut.Results), rankOf(hybrid); len(want) < 2 || !slices.Equal(got, want) {
		t.Fatalf("knowledge_search step ranks %+v, want the hybrid query's %+v", got, want)
	}
	if top := hybrid[0].Score; top <= 1.0/61 {
		t.Fatalf("top score %v: not fused from two rankings (BM25 alone gives at most 1/61)", top)
	}
	for i, c := range streamed.Citations {
		if i >= len(hybrid) || c.ChunkID != hybrid[i].ChunkID || c.Score != hybrid[i].Score {
			t.Fatalf("citation %d %+v, want the step's and query's %+v", i, c, hybrid)
		}
	}
	run = runSteps(t, ada, adaID, plainChat(t, ada), fmt.Sprintf(`[{"id":"find","toolId":"knowledge_search","inputs":{"knowledgeBaseId":%q,"query":"anything"}}]`, bobKB.ID))
	if run.Status != "failed" || !strings.Contains(run.Steps[0].Error, "KNOWLEDGE_BASE_NOT_FOUND") && !strings.Contains(run.Steps[0].Error, "knowledge base") {
		t.Fatalf("knowledge_search step on another user's knowledge base: %+v", run)
	}
	instructions, _ := json.Marshal(fmt.Sprintf(`run knowledge_search with {"knowledgeBaseId": %q, "query": "paid vacation days"}`, kb.ID))
	run = runSteps(t, ada, adaID, plainChat(t, ada), `[{"id":"agent","toolId":"agent","inputs":{"instructions":`+string(instructions)+`,"toolIds":["knowledge_search"]}}]`)
	if run.Status != "completed" || !strings.Contains(string(run.Steps[0].Output), "twenty-seven") {
		t.Fatalf("agent step calling knowledge_search: %+v", run)
	}
	if r := ada.do("PATCH", "/api/workflows/"+createWorkflow(t, ada, adaID, "bad").ID, `{"steps":[{"id":"find","toolId":"knowledge_search","inputs":{"query":"x"}}]}`); r.Status != 400 {
		t.Fatalf("a knowledge_search step without knowledgeBaseId: %d %s", r.Status, r.Body)
	}

	// Bad input.
	more := []string{kb.ID}
	for i := range 4 {
		more = append(more, newKnowledgeBase(t, ada, fmt.Sprintf("kb %d", i)).ID)
	}
	six := append(append([]string{}, more...), newKnowledgeBase(t, ada, "sixth").ID)
	plain := newChat(t, ada, map[string]any{"title": "plain"})
	for _, tt := range []struct {
		name   string
		c      *client
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"create with another user's knowledge base", ada, "POST", "/api/chats", map[string]any{"knowledgeBaseIds": []string{bobKB.ID}}, 404, "KNOWLEDGE_BASE_NOT_FOUND"},
		{"create with an unknown knowledge base", ada, "POST", "/api/chats", map[string]any{"knowledgeBaseIds": []string{"0190a6c4-0000-7000-8000-000000000000"}}, 404, "KNOWLEDGE_BASE_NOT_FOUND"},
		{"create with 6", ada, "POST", "/api/chats", map[string]any{"knowledgeBaseIds": six}, 400, "VALIDATION_FAILED"},
		{"create with a repeat", ada, "POST", "/api/chats", map[string]any{"knowledgeBaseIds": []string{kb.ID, strings.ToUpper(kb.ID)}}, 400, "VALIDATION_FAILED"},
		{"create with a bad id", ada, "POST", "/api/chats", map[string]any{"knowledgeBaseIds": []string{"nope"}}, 400, "VALIDATION_FAILED"},
		{"patch with another user's knowledge base", ada, "PATCH", "/api/chats/" + plain.ID, map[string]any{"knowledgeBaseIds": []string{bobKB.ID}}, 404, "KNOWLEDGE_BASE_NOT_FOUND"},
		{"patch with 6", ada, "PATCH", "/api/chats/" + plain.ID, map[string]any{"knowledgeBaseIds": six}, 400, "VALIDATION_FAILED"},
		{"patch with a string", ada, "PATCH", "/api/chats/" + plain.ID, map[string]any{"knowledgeBaseIds": kb.ID}, 400, "VALIDATION_FAILED"},
		{"patch another user's chat", bob, "PATCH", "/api/chats/" + plain.ID, map[string]any{"knowledgeBaseIds": []string{bobKB.ID}}, 403, "FORBIDDEN"},
	} {
		r := tt.c.do(tt.method, tt.path, tt.body)
		var e errorBody
		if r.Status != tt.status || !decodes(r, &e) || e.Code != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.name, r.Status, r.Body, tt.status, tt.code)
		}
	}
	// Exactly 5 is accepted; [] removes them; the chat is as patched.
	r = ada.do("PATCH", "/api/chats/"+plain.ID, map[string]any{"knowledgeBaseIds": more})
	var patched struct{ Data kbChatJSON }
	if r.Status != 200 || !decodes(r, &patched) || len(patched.Data.KnowledgeBaseIDs) != 5 {
		t.Fatalf("patch with 5: %d %s", r.Status, r.Body)
	}
	r = ada.do("GET", "/api/chats/"+plain.ID, nil)
	if r.Status != 200 || !decodes(r, &patched) || len(patched.Data.KnowledgeBaseIDs) != 5 {
		t.Fatalf("get after patch: %d %s", r.Status, r.Body)
	}
	r = ada.do("PATCH", "/api/chats/"+plain.ID, map[string]any{"knowledgeBaseIds": []string{}})
	patched.Data.KnowledgeBaseIDs = nil
	if r.Status != 200 || !decodes(r, &patched) || len(patched.Data.KnowledgeBaseIDs) != 0 {
		t.Fatalf("patch with []: %d %s", r.Status, r.Body)
	}
	// A chat without knowledge bases cites nothing.
	if m := sendCited(t, ada, plain.ID, "How many vacation days do employees get?"); len(m.Citations) != 0 {
		t.Fatalf("a chat without knowledge bases cited %+v", m.Citations)
	}
}

func sendCited(t *testing.T, c *client, chatID, content string) citedMessageJSON {
	t.Helper()
	r := c.do("POST", "/api/chats/"+chatID+"/messages", map[string]any{"content": content, "modelId": "builtin"})
	if r.Status != 201 {
		t.Fatalf("send %q: %d %s", content, r.Status, r.Body)
	}
	var out struct {
		Data struct {
			Response citedMessageJSON `json:"response"`
		}
	}
	r.decode(t, &out)
	return out.Data.Response
}

func citedMessages(t *testing.T, c *client, chatID string) []citedMessageJSON {
	t.Helper()
	r := c.do("GET", "/api/chats/"+chatID+"/messages", nil)
	if r.Status != 200 {
		t.Fatalf("messages: %d %s", r.Status, r.Body)
	}
	var out struct {
		Data struct {
			Messages []citedMessageJSON `json:"messages"`
		}
	}
	r.decode(t, &out)
	return out.Data.Messages
}

func plainChat(t *testing.T, c *client) string {
	t.Helper()
	return newChat(t, c, map[string]string{"title": "runs"}).ID
}
