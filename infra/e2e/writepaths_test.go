package e2e_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/toolserver"
)

// Sizes at the door: every write route that takes a body, sent a body at
// its limit, one byte over, and 8 MiB (each over-limit size also without a
// Content-Length, chunked). No size may give a 5xx or a hang; a refused
// size is a 4xx JSON error naming the limit; a refused write leaves
// nothing behind.

// bodyLimit is the API's limit on any request body (httpapi.MaxBodyBytes).
const bodyLimit = 1 << 20

// bigBody is the largest size every route is sent.
const bigBody = 8 << 20

// padding is 8 MiB of "x", sliced by every row's bodies.
var padding = strings.Repeat("x", bigBody)

// padded returns prefix + "x"... + suffix, n bytes in all.
func padded(prefix, suffix string, n int) []byte {
	k := n - len(prefix) - len(suffix)
	if k < 0 {
		panic(fmt.Sprintf("body of %d bytes cannot hold %q...%q", n, prefix, suffix))
	}
	return []byte(prefix + padding[:k] + suffix)
}

// sizedRequest is one request of the table.
type sizedRequest struct {
	method, url, contentType string
	body                     []byte
	chunked                  bool
	header                   []string
}

// send sends req with hc and reads the whole answer. A transport error
// (a reset, a hang past the client's timeout) is returned, not fatal: it
// is a finding of the table.
func send(hc *http.Client, req sizedRequest) (response, error) {
	var rd io.Reader = bytes.NewReader(req.body)
	if req.chunked {
		// A reader of unknown length: the client sends it chunked.
		rd = struct{ io.Reader }{rd}
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, req.method, req.url, rd)
	if err != nil {
		return response{}, err
	}
	if req.chunked && r.ContentLength != 0 {
		return response{}, fmt.Errorf("a chunked body with Content-Length %d", r.ContentLength)
	}
	r.Header.Set("Content-Type", req.contentType)
	for i := 0; i+1 < len(req.header); i += 2 {
		r.Header.Set(req.header[i], req.header[i+1])
	}
	resp, err := hc.Do(r)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("read the answer: %w", err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// writePath is a row of the table: a route, its limit and how to make a
// body of a given size for it.
type writePath struct {
	name, method, path string
	// base is the URL's scheme and host (the API's when empty).
	base string
	// contentType of the bodies (application/json when empty).
	contentType string
	// limit is the largest body (or, for definitions, the largest
	// definition) the route accepts, in bytes; limitText is how the
	// refusal names it (any of them).
	limit     int
	limitText []string
	// body makes a request body of n bytes (of the limited quantity).
	body func(n int) []byte
	// over is the status and code of a size over limit up to bodyLimit;
	// over bodyLimit every route answers 413 PAYLOAD_TOO_LARGE.
	overStatus int
	overCode   string
	// atLimit is the status wanted at the limit (0: any 4xx or 2xx but
	// 413: the route may refuse the body for what it says, not its size),
	// and atCode the code of an error answer there.
	atLimit int
	atCode  string
	// header returns the headers of a request with this body.
	header func(body []byte) []string
	// client sends the row's requests (the signed-in client's when nil).
	client *http.Client
	// stored counts what the route writes; a refusal must leave it as it
	// was, the write at the limit add grows (nil: the route writes nothing
	// a client can list).
	stored func(t *testing.T) int
	grows  int
	// sizes of the refusals, when not the default (limit+1); bigBody is
	// sent too unless noBig (a limit on a value in the body, not its size).
	sizes []int
	noBig bool
	// noBody marks a route that takes no body: a declared length over
	// the API's limit is 413, a chunked body is not read (the answer is
	// atLimit's, the answer to an empty body).
	noBody bool
	// accepted checks the answer at the limit.
	accepted func(t *testing.T, r response)
}

// TestWritePaths is the table: each write route at its limit, one byte
// over and 8 MiB (the refused sizes sent also chunked).
func TestWritePaths(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "write-paths@example.com")
	chat := newChat(t, c, map[string]string{"title": "sizes"})

	// A workflow whose runs take a text input and wait for a person.
	wfID := defineWorkflow(t, c, userID, "sized", `{
	  "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
	  "steps": [{"id": "ask", "toolId": "ask_human", "inputs": {"message": "Go on?"}}]}`)
	runCount := func(t *testing.T) int {
		var out struct {
			Data struct{ WorkflowRuns []unattendedRun }
		}
		c.do("GET", "/api/workflows/"+wfID+"/runs?limit=100", nil).decode(t, &out)
		return len(out.Data.WorkflowRuns)
	}
	waitingRun := func() string {
		status, run := startRun(t, c, chat.ID, wfID, map[string]any{"text": "x"})
		if status != 202 || run.Status != "waiting" {
			t.Fatalf("start a waiting run: %d %+v", status, run)
		}
		return run.ID
	}
	chatRespondRun, wfRespondRun := waitingRun(), waitingRun()

	// A webhook trigger of that workflow, and its signature.
	hook := createTrigger(t, c, wfID, `{"type":"webhook","enabled":true}`)
	sign := func(body []byte) []string {
		ts := fmt.Sprint(time.Now().Unix())
		m := hmac.New(sha256.New, []byte(hook.Secret))
		m.Write([]byte(ts + "."))
		m.Write(body)
		return []string{"X-Signature", "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))}
	}
	triggerCount := func(t *testing.T) int {
		var out struct {
			Data struct{ Triggers []triggerJSON }
		}
		c.do("GET", "/api/workflows/"+wfID+"/triggers", nil).decode(t, &out)
		return len(out.Data.Triggers)
	}

	// A workflow to PATCH (named "p", no description: the definition's
	// size below depends on it).
	patched := createWorkflow(t, c, userID, "p")
	version := func(id string) func(t *testing.T) int {
		return func(t *testing.T) int { return getWorkflow(t, c, id).Version }
	}
	workflowCount := func(t *testing.T) int {
		var out struct {
			Data struct{ Workflows []workflowJSON }
		}
		c.do("GET", "/api/users/"+userID+"/workflows?limit=100", nil).decode(t, &out)
		return len(out.Data.Workflows)
	}
	// A definition of one hash step: its stored JSON has this many bytes
	// besides the step's text.
	defOverhead := len(`{"name":"p","description":"","steps":[{"id":"big","toolId":"hash","inputs":{"algorithm":"md5","text":""},"outputs":["digest"]}],"exposeAsTool":false}`)
	stepsOf := func(n int) string {
		return `[{"id":"big","toolId":"hash","inputs":{"algorithm":"md5","text":"` + padding[:n-defOverhead] + `"}}]`
	}

	// A proposal whose apply would pass 350 KiB: a definition 100 bytes
	// under the limit, and a proposed step more.
	const definitionLimit = 350 << 10
	nearlyFull := createWorkflow(t, c, userID, "p")
	if r := c.do("PATCH", "/api/workflows/"+nearlyFull.ID, `{"steps":`+stepsOf(definitionLimit-100)+`}`); r.Status != 200 {
		t.Fatalf("a definition near the limit: %d %.300s", r.Status, r.Body)
	}
	patchedDef := createWorkflow(t, c, userID, "p")
	tooBig := propose(t, c, getWorkflow(t, c, nearlyFull.ID), `add a step using hash with {"text": "one step more", "algorithm": "md5"}`)

	// A personal access token for the MCP endpoint.
	r := c.do("POST", "/api/users/"+userID+"/tokens", `{"name":"sizes","expiresInDays":1}`)
	var pat struct{ Data struct{ Token string } }
	r.decode(t, &pat)
	if r.Status != 201 || pat.Data.Token == "" {
		t.Fatalf("token: %d %s", r.Status, r.Body)
	}
	tokenCount := func(t *testing.T) int {
		var out struct{ Data []json.RawMessage }
		c.do("GET", "/api/users/"+userID+"/tokens", nil).decode(t, &out)
		return len(out.Data)
	}

	// An attachment whose signed upload takes 2 MiB (over the API's 1 MiB:
	// the signature, not the API's limit, bounds it).
	const uploadSize = 2 << 20
	upload := newAttachment(t, c, chat.ID, "big.txt", "text/plain", uploadSize)
	uploadHeader := func([]byte) []string {
		var h []string
		for k, v := range upload.UploadHeaders {
			if !strings.EqualFold(k, "Content-Type") {
				h = append(h, k, v)
			}
		}
		return h
	}

	uploaded := func(t *testing.T) int {
		if getAttachment(t, c, chat.ID, upload.ID).Status == "ready" {
			return 1
		}
		return 0
	}
	chatCount := func(t *testing.T) int { return listChats(t, c, userID, "").Total }
	messageCount := func(t *testing.T) int { return len(getMessages(t, c, chat.ID)) }
	proposalCount := func(t *testing.T) int { return len(workflowMessages(t, c, patched.ID)) }
	fresh := newClient(t, srv.API)
	signedIn := func(email string) func(t *testing.T) int {
		return func(t *testing.T) int {
			r := newClient(t, srv.API).do("POST", "/api/auth/sign-in/email", map[string]string{"email": email, "password": "chat-password-1"})
			if r.Status == 200 {
				return 1
			}
			return 0
		}
	}
	mib := []string{"1 MiB", "1048576"}
	exact := func(prefix, suffix string) func(int) []byte {
		return func(n int) []byte { return padded(prefix, suffix, n) }
	}
	pad := func(object string) func(int) []byte {
		return exact(strings.TrimSuffix(object, "}")+`,"pad":"`, `"}`)
	}
	runs := "/api/chats/" + chat.ID + "/workflow-runs"
	// inputText checks that the run of a 2xx answer got an input text of n
	// bytes, whole (its size when the run shows it cut).
	inputText := func(n int) func(t *testing.T, r response) {
		return func(t *testing.T, r response) {
			var out struct {
				Data struct {
					ID    string `json:"id"`
					RunID string `json:"runId"`
				}
			}
			r.decode(t, &out)
			id := out.Data.ID + out.Data.RunID
			// A large input is shown cut: {preview, size, truncated}.
			in := getRunInput(t, c, wfID, id)
			text, _ := in["text"].(string)
			size, _ := in["size"].(float64)
			if len(text) != n && (in["truncated"] != true || int(size) != n+len(`{"text":""}`)) {
				t.Errorf("run %s: input %.300v, want a text of %d bytes", id, in, n)
			}
		}
	}
	const none = "00000000-0000-4000-8000-000000000000"

	rows := []writePath{
		{name: "sign-up", grows: 1, method: "POST", path: "/api/auth/sign-up/email", client: fresh.http, atLimit: 200,
			body: pad(`{"email":"sized-up@example.com","password":"chat-password-1","name":"s"}`), stored: signedIn("sized-up@example.com")},
		{name: "sign-in", method: "POST", path: "/api/auth/sign-in/email", client: newClient(t, srv.API).http, atLimit: 200,
			body: pad(`{"email":"write-paths@example.com","password":"chat-password-1"}`)},
		{name: "model preference", method: "POST", path: "/api/users/" + userID + "/model-preference", atLimit: 200,
			body: pad(`{"modelId":"builtin"}`)},
		{name: "tool permission", method: "PUT", path: "/api/users/" + userID + "/tool-permissions/hash", atLimit: 200,
			body: pad(`{"policy":"allow"}`)},
		{name: "create chat", grows: 1, method: "POST", path: "/api/chats", atLimit: 201, body: pad(`{"title":"sized"}`), stored: chatCount},
		{name: "rename chat", method: "PATCH", path: "/api/chats/" + chat.ID, atLimit: 200, body: pad(`{"title":"sizes"}`)},
		{name: "send message", grows: 2, method: "POST", path: "/api/chats/" + chat.ID + "/messages", atLimit: 201,
			body: pad(`{"content":"hello","modelId":"builtin"}`), stored: messageCount},
		{name: "stream message", grows: 2, method: "POST", path: "/api/chats/" + chat.ID + "/messages/stream", atLimit: 200,
			body: pad(`{"content":"hello","modelId":"builtin","userId":"` + userID + `"}`), stored: messageCount, header: func([]byte) []string { return []string{"Accept", "text/event-stream"} }},
		{name: "approve tool call", method: "POST", path: "/api/chats/" + chat.ID + "/tool-calls/call_none/approve", atLimit: 409, atCode: "TOOL_CALL_NOT_PENDING",
			body: pad(`{"remember":false}`)},
		{name: "deny tool call", method: "POST", path: "/api/chats/" + chat.ID + "/tool-calls/call_none/deny", atLimit: 409, atCode: "TOOL_CALL_NOT_PENDING",
			body: pad(`{"remember":false}`)},
		{name: "create attachment", method: "POST", path: "/api/chats/" + chat.ID + "/attachments", atLimit: 201,
			body: pad(`{"name":"a.txt","contentType":"text/plain","size":10}`)},
		{name: "signed upload", grows: 1, method: "PUT", base: "-", path: upload.UploadURL, contentType: upload.UploadHeaders["Content-Type"], client: blobClient, stored: uploaded,
			limit: uploadSize, limitText: []string{fmt.Sprint(uploadSize)}, body: exact("", ""), header: uploadHeader,
			overStatus: 403, overCode: "SIGNED_HEADER_MISMATCH", atLimit: 200},
		{name: "attachment declared size", method: "POST", path: "/api/chats/" + chat.ID + "/attachments", atLimit: 201,
			limit: 25 << 20, limitText: []string{"25 MiB", "26214400"}, overCode: "ATTACHMENT_TOO_LARGE", sizes: []int{25<<20 + 1, 1 << 40}, noBig: true,
			body: func(n int) []byte {
				return []byte(fmt.Sprintf(`{"name":"a.txt","contentType":"text/plain","size":%d}`, n))
			}},
		{name: "create workflow", grows: 1, method: "POST", path: "/api/workflows", atLimit: 201,
			body: pad(`{"userId":"` + userID + `","name":"sized"}`), stored: workflowCount},
		{name: "create workflow definition", grows: 1, method: "POST", path: "/api/workflows", atLimit: 201,
			limit: definitionLimit, limitText: []string{"350 KiB", "358400"}, overCode: "WORKFLOW_TOO_LARGE",
			sizes: []int{definitionLimit + 1, 900_000},
			body:  func(n int) []byte { return []byte(`{"userId":"` + userID + `","name":"p","steps":` + stepsOf(n) + `}`) }, stored: workflowCount},
		{name: "edit workflow", method: "PATCH", path: "/api/workflows/" + patched.ID, atLimit: 200,
			body: pad(`{"description":"sized"}`)},
		{name: "edit workflow definition", grows: 1, method: "PATCH", path: "/api/workflows/" + patchedDef.ID, atLimit: 200,
			limit: definitionLimit, limitText: []string{"350 KiB", "358400"}, overCode: "WORKFLOW_TOO_LARGE",
			sizes: []int{definitionLimit + 1, 900_000},
			body:  func(n int) []byte { return []byte(`{"steps":` + stepsOf(n) + `}`) }, stored: version(patchedDef.ID)},
		{name: "workflow message", grows: 2, method: "POST", path: "/api/workflows/" + patched.ID + "/messages", atLimit: 201,
			body: pad(`{"content":"hello","modelId":"builtin"}`), stored: proposalCount},
		{name: "apply proposal", method: "POST", path: "/api/workflows/" + nearlyFull.ID + "/messages/apply", atLimit: 413, atCode: "WORKFLOW_TOO_LARGE",
			body: pad(`{"proposalId":"` + tooBig.ID + `"}`), stored: version(nearlyFull.ID)},
		{name: "reject proposal", method: "POST", path: "/api/workflows/" + nearlyFull.ID + "/messages/reject", atLimit: 200,
			body: pad(`{"proposalId":"` + tooBig.ID + `"}`)},
		{name: "start run", grows: 1, method: "POST", path: runs, atLimit: 202,
			body: exact(`{"workflowId":"`+wfID+`","input":{"text":"`, `"}}`), stored: runCount,
			accepted: inputText(bodyLimit - len(`{"workflowId":"`+wfID+`","input":{"text":""}}`))},
		{name: "respond (chat)", method: "POST", path: runs + "/" + chatRespondRun + "/steps/ask/respond", atLimit: 202,
			body: pad(`{"approved":true}`)},
		{name: "respond (workflow)", method: "POST", path: "/api/workflows/" + wfID + "/runs/" + wfRespondRun + "/steps/ask/respond", atLimit: 202,
			body: pad(`{"approved":false}`)},
		{name: "retry (chat)", grows: 1, method: "POST", path: runs + "/" + chatRespondRun + "/retry", atLimit: 202,
			body: pad(`{"fromStepId":"ask"}`), stored: runCount},
		{name: "retry (workflow)", grows: 1, method: "POST", path: "/api/workflows/" + wfID + "/runs/" + wfRespondRun + "/retry", atLimit: 202,
			body: pad(`{"fromStepId":"ask"}`), stored: runCount},
		{name: "create trigger", grows: 1, method: "POST", path: "/api/workflows/" + wfID + "/triggers", atLimit: 201,
			body: pad(`{"type":"webhook","enabled":false}`), stored: triggerCount},
		{name: "edit trigger", method: "PATCH", path: "/api/workflows/" + wfID + "/triggers/" + hook.ID, atLimit: 200,
			body: pad(`{"enabled":true}`)},
		{name: "webhook", grows: 1, method: "POST", path: "/hooks/" + hook.ID, client: &http.Client{Timeout: patience, Transport: c.http.Transport}, atLimit: 202,
			limit: 256 << 10, limitText: []string{"256 KiB", "262144"}, overCode: "PAYLOAD_TOO_LARGE",
			body: exact(`{"text":"`, `"}`), header: sign, stored: runCount, accepted: inputText(256<<10 - len(`{"text":""}`))},
		{name: "rotate trigger secret", method: "POST", path: "/api/workflows/" + wfID + "/triggers/" + hook.ID + "/rotate-secret", atLimit: 200,
			body: pad(`{"previousSecretValidSeconds":0}`)},
		{name: "create token", grows: 1, method: "POST", path: "/api/users/" + userID + "/tokens", atLimit: 201,
			body: pad(`{"name":"sized","expiresInDays":1}`), stored: tokenCount},
		{name: "MCP", method: "POST", path: "/api/mcp", client: &http.Client{Timeout: patience, Transport: c.http.Transport}, atLimit: 200,
			body: exact(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"pad":"`, `"}}}`),
			header: func([]byte) []string {
				return []string{"Authorization", "Bearer " + pat.Data.Token, "Accept", "application/json, text/event-stream"}
			}},
		{name: "OAuth registration", method: "POST", path: "/oauth/register", client: &http.Client{Timeout: patience, Transport: c.http.Transport}, atLimit: 201,
			limit: 64 << 10, limitText: []string{"64 KiB", "65536"}, overCode: "PAYLOAD_TOO_LARGE",
			body: pad(`{"redirect_uris":["http://127.0.0.1:7/cb"],"client_name":"sized","token_endpoint_auth_method":"none"}`)},
		{name: "OAuth token", method: "POST", path: "/oauth/token", contentType: "application/x-www-form-urlencoded",
			client: &http.Client{Timeout: patience, Transport: c.http.Transport},
			body:   exact("grant_type=refresh_token&client_id=none&refresh_token=none&pad=", ""), atLimit: 401},
		{name: "OAuth revoke", method: "POST", path: "/oauth/revoke", contentType: "application/x-www-form-urlencoded",
			client: &http.Client{Timeout: patience, Transport: c.http.Transport},
			body:   exact("token=none&client_id=none&pad=", ""), atLimit: 401},
		{name: "OAuth authorize form", method: "POST", path: "/oauth/authorize", contentType: "application/x-www-form-urlencoded",
			client: &http.Client{Timeout: patience, Transport: c.http.Transport},
			body:   exact("csrf=none&action=approve&pad=", ""), atLimit: 403},
		{name: "tool server", method: "POST", base: srv.MCP, path: "", client: &http.Client{Timeout: patience},
			body:   exact(`{"method":"runTool","params":{"toolId":"hash","input":{"algorithm":"md5","text":"`, `"}}}`),
			header: func([]byte) []string { return []string{toolserver.ServiceKeyHeader, srv.Key} }, atLimit: 200},

		// Routes that take no body.
		{name: "sign out", method: "POST", path: "/api/auth/sign-out", noBody: true, client: newClient(t, srv.API).http, atLimit: 401},
		{name: "sign out everywhere", method: "POST", path: "/api/auth/sign-out-all", noBody: true, client: newClient(t, srv.API).http, atLimit: 401},
		{name: "stop reply", method: "POST", path: "/api/chats/" + chat.ID + "/messages/" + none + "/stop", noBody: true, atLimit: 404},
		{name: "cancel (chat)", method: "POST", path: runs + "/" + none + "/cancel", noBody: true, atLimit: 404},
		{name: "cancel (workflow)", method: "POST", path: "/api/workflows/" + wfID + "/runs/" + none + "/cancel", noBody: true, atLimit: 404},
	}

	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			if row.limit == 0 {
				row.limit, row.limitText = bodyLimit, mib
			}
			if row.overStatus == 0 {
				row.overStatus = 413
			}
			if row.overCode == "" {
				row.overCode = "PAYLOAD_TOO_LARGE"
			}
			if row.contentType == "" {
				row.contentType = "application/json"
			}
			if row.client == nil {
				row.client = c.http
			}
			url := srv.API + row.path
			switch row.base {
			case "-":
				url = row.path
			case "":
			default:
				url = row.base + row.path
			}
			sizes := row.sizes
			if sizes == nil {
				sizes = []int{row.limit + 1}
			}
			if !row.noBig {
				sizes = append(sizes, bigBody)
			}
			if row.noBody {
				row.body = func(n int) []byte { return padded("", "", n) }
			}
			before := -1
			if row.stored != nil {
				before = row.stored(t)
			}
			for _, n := range sizes {
				for _, chunked := range []bool{false, true} {
					name := fmt.Sprintf("%d bytes", n)
					if chunked {
						name += ", chunked"
					}
					body := row.body(n)
					if row.sizes == nil && len(body) != n {
						t.Fatalf("%s: a body of %d bytes", name, len(body))
					}
					var header []string
					if row.header != nil {
						header = row.header(body)
					}
					r, err := send(row.client, sizedRequest{method: row.method, url: url, contentType: row.contentType, body: body, chunked: chunked, header: header})
					if err != nil {
						t.Errorf("%s: no answer: %v", name, err)
						continue
					}
					status, code := row.overStatus, row.overCode
					if len(body) > bodyLimit && row.base != "-" {
						status, code = 413, "PAYLOAD_TOO_LARGE"
					}
					if chunked && row.base == "-" {
						status, code = 411, "LENGTH_REQUIRED"
					}
					if row.noBody && chunked {
						// Not read: the answer to the request itself.
						if r.Status != row.atLimit {
							t.Errorf("%s: %d %.300s, want %d", name, r.Status, r.Body, row.atLimit)
						}
						continue
					}
					e := expectError(t, name, r, status, code)
					named := false
					for _, s := range append(row.limitText, mib...) {
						named = named || strings.Contains(e.Message, s)
					}
					if !named && status != 411 {
						t.Errorf("%s: the message %q names no limit (%v)", name, e.Message, row.limitText)
					}
				}
			}
			// Checked once for all the refusals: sign-in, the count of the
			// sign-up row, is limited per address.
			if row.stored != nil {
				if after := row.stored(t); after != before {
					t.Errorf("refused, yet %d items where there were %d", after, before)
				}
			}
			// At the limit: accepted by the size check.
			body := row.body(row.limit)
			if row.noBody {
				body = nil
			}
			var header []string
			if row.header != nil {
				header = row.header(body)
			}
			r, err := send(row.client, sizedRequest{method: row.method, url: url, contentType: row.contentType, body: body, header: header})
			switch {
			case err != nil:
				t.Errorf("at the limit (%d bytes): no answer: %v", len(body), err)
			case r.Status >= 500 || (r.Status == 413 && row.atLimit != 413):
				t.Errorf("at the limit (%d bytes): %d %.300s", len(body), r.Status, r.Body)
			case row.atCode != "":
				expectError(t, "at the limit", r, row.atLimit, row.atCode)
			case row.atLimit != 0 && r.Status != row.atLimit:
				t.Errorf("at the limit (%d bytes): %d %.300s, want %d", len(body), r.Status, r.Body, row.atLimit)
			case row.atLimit == 0:
				t.Logf("at the limit (%d bytes): %d", len(body), r.Status)
			case row.accepted != nil:
				row.accepted(t, r)
			}
			if row.stored != nil && err == nil {
				want := before
				if r.Status < 400 {
					want += row.grows
				}
				if after := row.stored(t); after != want {
					t.Errorf("at the limit (%d): %d items where there were %d, want %d", r.Status, after, before, want)
				}
			}
		})
	}
}
