package e2e_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/knowledge/knowledgetest"
)

type knowledgeBaseJSON struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	DocumentCount int    `json:"documentCount"`
	ChunkCount    int    `json:"chunkCount"`
}

type knowledgeDocJSON struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	ChunkCount *int   `json:"chunkCount"`
	Error      string `json:"error"`
}

type knowledgeResultJSON struct {
	DocumentID   string  `json:"documentId"`
	DocumentName string  `json:"documentName"`
	ChunkID      string  `json:"chunkId"`
	Text         string  `json:"text"`
	Score        float64 `json:"score"`
	Start        int     `json:"start"`
	End          int     `json:"end"`
}

func newKnowledgeBase(t *testing.T, c *client, name string) knowledgeBaseJSON {
	t.Helper()
	r := c.do("POST", "/api/knowledge-bases", map[string]any{"name": name})
	if r.Status != 201 {
		t.Fatalf("create knowledge base: %d %s", r.Status, r.Body)
	}
	var out struct{ Data knowledgeBaseJSON }
	r.decode(t, &out)
	return out.Data
}

func addDocument(t *testing.T, c *client, kbID, attachmentID string) knowledgeDocJSON {
	t.Helper()
	r := c.do("POST", "/api/knowledge-bases/"+kbID+"/documents", map[string]any{"attachmentId": attachmentID})
	if r.Status != 202 {
		t.Fatalf("add document: %d %s", r.Status, r.Body)
	}
	var out struct{ Data knowledgeDocJSON }
	r.decode(t, &out)
	if out.Data.Status != "indexing" {
		t.Fatalf("add document: %s", r.Body)
	}
	return out.Data
}

// indexed waits (polling, with the suite's patience) until the document
// is no longer indexing, and returns it.
func indexed(t *testing.T, c *client, kbID, docID string) knowledgeDocJSON {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		r := c.do("GET", "/api/knowledge-bases/"+kbID+"/documents/"+docID, nil)
		if r.Status != 200 {
			t.Fatalf("get document: %d %s", r.Status, r.Body)
		}
		var out struct{ Data knowledgeDocJSON }
		r.decode(t, &out)
		if out.Data.Status != "indexing" {
			return out.Data
		}
		if time.Now().After(deadline) {
			t.Fatalf("document %s still indexing after %s", docID, patience)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func queryKnowledge(t *testing.T, c *client, kbID string, body map[string]any) []knowledgeResultJSON {
	t.Helper()
	r := c.do("POST", "/api/knowledge-bases/"+kbID+"/query", body)
	if r.Status != 200 {
		t.Fatalf("query: %d %s", r.Status, r.Body)
	}
	var out struct {
		Data struct {
			Results []knowledgeResultJSON `json:"results"`
		}
	}
	r.decode(t, &out)
	return out.Data.Results
}

// TestKnowledgeBases: a Markdown file and a text PDF are indexed and a
// query finds the passage with its byte offsets; a scanned PDF and a zip
// named .pdf fail with a clear error; another user's knowledge base and
// attachment are 404; a query over 10,000 characters and a topK over 50
// are 400; the per-user cap is 409; deleting a document takes it out of
// the results.
func TestKnowledgeBases(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "ALLOWED_ORIGINS="+frontendOrigin, "KNOWLEDGE_BASES_PER_USER=3")
	ada, bob := newClient(t, srv.API), newClient(t, srv.API)
	signUpChatUser(t, ada, "ada-knowledge@example.com")
	signUpChatUser(t, bob, "bob-knowledge@example.com")
	chat := newChat(t, ada, map[string]any{"title": "files"})

	var md strings.Builder
	md.WriteString("# Handbook\n\n")
	for i := range 300 {
		fmt.Fprintf(&md, "Section %d talks about ordinary matters of the office and its routines.\n", i)
	}
	secret := "The vacation policy grants twenty-seven paid days to every employee after probation."
	md.WriteString(secret + "\n")
	notes := readyAttachment(t, ada, chat.ID, "handbook.md", "text/markdown", []byte(md.String()))
	pdfDoc := readyAttachment(t, ada, chat.ID, "expenses.pdf", "application/pdf",
		knowledgetest.TextPDF([][]string{{"Travel expenses are reimbursed within 14 days."}, {"Receipts must be kept for audits."}}))
	scanned := readyAttachment(t, ada, chat.ID, "scan.pdf", "application/pdf", knowledgetest.ImagePDF(25<<20-4096))
	image := readyAttachment(t, ada, chat.ID, "photo.png", "image/png", pngFile)

	kb := newKnowledgeBase(t, ada, "Company")
	dMD := addDocument(t, ada, kb.ID, notes.ID)
	dPDF := addDocument(t, ada, kb.ID, pdfDoc.ID)
	dScan := addDocument(t, ada, kb.ID, scanned.ID)

	if got := indexed(t, ada, kb.ID, dMD.ID); got.Status != "ready" || got.ChunkCount == nil || *got.ChunkCount < 2 {
		t.Fatalf("markdown: %+v", got)
	}
	if got := indexed(t, ada, kb.ID, dPDF.ID); got.Status != "ready" {
		t.Fatalf("pdf: %+v", got)
	}
	if got := indexed(t, ada, kb.ID, dScan.ID); got.Status != "failed" || !strings.Contains(got.Error, "no text") {
		t.Fatalf("scanned pdf: %+v, want failed with no text", got)
	}

	res := queryKnowledge(t, ada, kb.ID, map[string]any{"query": "how many vacation days do employees get?", "topK": 3})
	if len(res) == 0 || res[0].DocumentID != dMD.ID || !strings.Contains(res[0].Text, "twenty-seven") || res[0].DocumentName != "handbook.md" {
		t.Fatalf("query results: %+v", res)
	}
	if text := md.String(); res[0].Start < 0 || res[0].End > len(text) || text[res[0].Start:res[0].End] != res[0].Text {
		t.Fatalf("result offsets [%d:%d] do not hold its text", res[0].Start, res[0].End)
	}
	if res := queryKnowledge(t, ada, kb.ID, map[string]any{"query": "travel receipts reimbursed"}); len(res) == 0 || res[0].DocumentID != dPDF.ID {
		t.Fatalf("pdf query results: %+v", res)
	}

	// A zip named .pdf is refused at upload (its attachment fails) and so
	// cannot be added.
	zip := newAttachment(t, ada, chat.ID, "archive.pdf", "application/pdf", 104)
	upload(t, zip, append([]byte("PK\x03\x04"), make([]byte, 100)...))
	bobChat := newChat(t, bob, map[string]any{"title": "bob's"})
	bobFile := readyAttachment(t, bob, bobChat.ID, "bob.txt", "text/plain", []byte("bob's notes"))
	bobKB := newKnowledgeBase(t, bob, "Bob's")
	long := strings.Repeat("a", 10001)
	for _, tt := range []struct {
		name   string
		c      *client
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"zip named pdf", ada, "POST", "/api/knowledge-bases/" + kb.ID + "/documents", map[string]any{"attachmentId": zip.ID}, 409, "ATTACHMENT_FAILED"},
		{"image", ada, "POST", "/api/knowledge-bases/" + kb.ID + "/documents", map[string]any{"attachmentId": image.ID}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"another user's attachment", ada, "POST", "/api/knowledge-bases/" + kb.ID + "/documents", map[string]any{"attachmentId": bobFile.ID}, 404, "ATTACHMENT_NOT_FOUND"},
		{"another user's knowledge base", bob, "GET", "/api/knowledge-bases/" + kb.ID, nil, 404, "KNOWLEDGE_BASE_NOT_FOUND"},
		{"another user's query", bob, "POST", "/api/knowledge-bases/" + kb.ID + "/query", map[string]any{"query": "vacation"}, 404, "KNOWLEDGE_BASE_NOT_FOUND"},
		{"another user's documents", bob, "GET", "/api/knowledge-bases/" + kb.ID + "/documents", nil, 404, "KNOWLEDGE_BASE_NOT_FOUND"},
		{"into another user's knowledge base", ada, "POST", "/api/knowledge-bases/" + bobKB.ID + "/documents", map[string]any{"attachmentId": notes.ID}, 404, "KNOWLEDGE_BASE_NOT_FOUND"},
		{"query of 10,001 characters", ada, "POST", "/api/knowledge-bases/" + kb.ID + "/query", map[string]any{"query": long}, 400, "QUERY_TOO_LONG"},
		{"topK 51", ada, "POST", "/api/knowledge-bases/" + kb.ID + "/query", map[string]any{"query": "vacation", "topK": 51}, 400, "VALIDATION_FAILED"},
		{"topK 0", ada, "POST", "/api/knowledge-bases/" + kb.ID + "/query", map[string]any{"query": "vacation", "topK": 0}, 400, "VALIDATION_FAILED"},
		{"no name", ada, "POST", "/api/knowledge-bases", map[string]any{"name": " "}, 400, "VALIDATION_FAILED"},
		{"bad id", ada, "GET", "/api/knowledge-bases/nope", nil, 400, "INVALID_ID"},
		{"bad cursor", ada, "GET", "/api/knowledge-bases?cursor=x", nil, 400, "INVALID_PAGINATION"},
	} {
		r := tt.c.do(tt.method, tt.path, tt.body)
		var e errorBody
		if r.Status != tt.status || !decodes(r, &e) || e.Code != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.name, r.Status, r.Body, tt.status, tt.code)
		}
	}
	// A query of exactly 10,000 characters is answered.
	queryKnowledge(t, ada, kb.ID, map[string]any{"query": strings.Repeat("b", 9999) + " "})

	// The per-user cap (3 here): the 4th is 409.
	newKnowledgeBase(t, ada, "two")
	newKnowledgeBase(t, ada, "three")
	if r := ada.do("POST", "/api/knowledge-bases", map[string]any{"name": "four"}); r.Status != 409 || !strings.Contains(string(r.Body), "KNOWLEDGE_BASE_LIMIT") {
		t.Fatalf("fourth knowledge base: %d %s", r.Status, r.Body)
	}
	r := ada.do("GET", "/api/knowledge-bases?limit=2", nil)
	var page struct {
		Data struct {
			KnowledgeBases []knowledgeBaseJSON `json:"knowledgeBases"`
			NextCursor     string              `json:"nextCursor"`
		}
	}
	r.decode(t, &page)
	if r.Status != 200 || len(page.Data.KnowledgeBases) != 2 || page.Data.KnowledgeBases[0].ID != kb.ID || page.Data.NextCursor == "" {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	if kb := page.Data.KnowledgeBases[0]; kb.DocumentCount != 3 || kb.ChunkCount < 3 {
		t.Fatalf("counts: %+v", kb)
	}

	// Deleting the document takes it out of the results.
	if r := ada.do("DELETE", "/api/knowledge-bases/"+kb.ID+"/documents/"+dMD.ID, nil); r.Status != 204 {
		t.Fatalf("delete document: %d %s", r.Status, r.Body)
	}
	for _, res := range queryKnowledge(t, ada, kb.ID, map[string]any{"query": "vacation days employees"}) {
		if res.DocumentID == dMD.ID {
			t.Fatalf("a deleted document answered: %+v", res)
		}
	}
	if r := ada.do("DELETE", "/api/knowledge-bases/"+kb.ID, nil); r.Status != 204 {
		t.Fatalf("delete knowledge base: %d %s", r.Status, r.Body)
	}
	if r := ada.do("GET", "/api/knowledge-bases/"+kb.ID, nil); r.Status != 404 {
		t.Fatalf("deleted knowledge base: %d", r.Status)
	}
	// Its slot under the cap is free again.
	newKnowledgeBase(t, ada, "four")
}

// decodes decodes r's body into v, reporting whether it is JSON.
func decodes(r response, v any) bool { return json.Unmarshal(r.Body, v) == nil }

// TestKnowledgeIndexingSurvivesKill: a server killed (SIGKILL) while a
// large document is indexing leaves the job in the store; the restarted
// server's sweeper takes it over when its lease ends and the document
// becomes ready.
func TestKnowledgeIndexingSurvivesKill(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "devserver.json")
	env := []string{"DATA_FILE=" + file, "ALLOWED_ORIGINS=" + frontendOrigin, "GENERATION_LEASE=2s", "SWEEP_INTERVAL=200ms"}
	srv := startServer(t, env...)
	ada := newClient(t, srv.API)
	r := ada.do("POST", "/api/auth/sign-up/email", map[string]string{"email": "ada-kill-kb@example.com", "password": "chat-password-1", "name": "Ada"})
	if r.Status != 200 {
		t.Fatalf("sign-up: %d %s", r.Status, r.Body)
	}
	token := sessionToken(t, r)
	chat := newChat(t, ada, map[string]any{"title": "big"})
	var big strings.Builder
	for i := 0; big.Len() < 20<<20; i++ {
		fmt.Fprintf(&big, "line %d of the long report mentions quarterly revenue item%d and region%d.\n", i, i%977, i%31)
	}
	big.WriteString("The final paragraph names the auditor Zebulon Quartermaine.\n")
	a := readyAttachment(t, ada, chat.ID, "report.txt", "text/plain", []byte(big.String()))
	kb := newKnowledgeBase(t, ada, "Reports")
	doc := addDocument(t, ada, kb.ID, a.ID)
	_ = srv.cmd.Process.Kill()
	<-srv.done

	again := startServer(t, env...)
	c := withCookie(t, again.API, token)
	got := indexed(t, c, kb.ID, doc.ID)
	if got.Status != "ready" || got.ChunkCount == nil || *got.ChunkCount < 1000 {
		t.Fatalf("after the kill: %+v, want ready", got)
	}
	res := queryKnowledge(t, c, kb.ID, map[string]any{"query": "who is the auditor Zebulon", "topK": 5})
	if len(res) == 0 || !strings.Contains(res[0].Text, "Zebulon Quartermaine") {
		t.Fatalf("query after the kill: %+v", res)
	}
}
