package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob/s3blob/s3blobtest"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/lambdahttp"
	"github.com/workflowchat/service/shared/lambdahttp/lambdatest"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
	"github.com/workflowchat/service/shared/tools"
	"github.com/workflowchat/service/shared/toolserver"
)

// TestChatsFunctionEvents creates a chat, posts a message and reads the
// conversation back through recorded API Gateway events.
func TestChatsFunctionEvents(t *testing.T) {
	db := storetest.New(t)
	ctx := context.Background()
	const key = "chats-test-key-0123456789"
	reg, err := tools.NewRegistry(tools.Builtin(tools.Config{})...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(httpapi.Stack(toolserver.Routes(reg, key), httpapi.Options{}))
	defer ts.Close()
	s3 := s3blobtest.Start(t, "blobs")
	h, err := newHandler(ctx, db.Env(t, map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "ChatsFunction", "MCP_URL": ts.URL, "MCP_SERVICE_KEY": key, "LOG_LEVEL": "error",
		"BLOB_BUCKET": "blobs", "BLOB_ENDPOINT": s3}))
	if err != nil {
		t.Fatal(err)
	}
	invoke := lambdahttp.NewAPIGatewayV2(h)
	me, err := auth.NewService(store.NewUsers(db.DB, db.Users(), db.Sessions()), &auth.Hasher{Memory: 64, Time: 1, Threads: 1}, nil).
		SignUp(ctx, auth.Credentials{Email: "l@example.com", Password: "password-1x", Name: "L"})
	if err != nil {
		t.Fatal(err)
	}
	cookie := []string{auth.CookieName + "=" + me.Token}

	ev := lambdatest.LoadV2(t, "testdata/create-chat.json")
	ev.Cookies = cookie
	resp, err := invoke(ctx, ev)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	var created struct {
		Data struct{ ID, Title, UserID string }
	}
	lambdatest.DecodeBody(t, resp, &created)
	if created.Data.Title != "From Lambda" || created.Data.UserID != me.User.ID {
		t.Errorf("chat = %+v", created.Data)
	}

	for _, name := range []string{"post-message", "list-messages"} {
		ev := lambdatest.LoadV2(t, "testdata/"+name+".json")
		ev.RawPath = strings.Replace(ev.RawPath, "CHAT_ID", created.Data.ID, 1)
		ev.RequestContext.HTTP.Path = ev.RawPath
		ev.Cookies = cookie
		resp, err := invoke(ctx, ev)
		if err != nil || resp.StatusCode/100 != 2 || !strings.Contains(resp.Body, "hello from lambda") {
			t.Fatalf("%s: %d %s %v", name, resp.StatusCode, resp.Body, err)
		}
		if name == "list-messages" && strings.Count(resp.Body, `"role"`) != 2 {
			t.Errorf("messages = %s", resp.Body)
		}
	}

	// The search finds the message, its word folded and marked.
	ev = lambdatest.LoadV2(t, "testdata/search-chats.json")
	ev.RawPath = strings.Replace(ev.RawPath, "USER_ID", me.User.ID, 1)
	ev.RequestContext.HTTP.Path = ev.RawPath
	ev.Cookies = cookie
	resp, err = invoke(ctx, ev)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("search: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	var found struct {
		Data struct {
			Results []struct{ ChatID, Snippet string }
		}
	}
	lambdatest.DecodeBody(t, resp, &found)
	if r := found.Data.Results; len(r) != 1 || r[0].ChatID != created.Data.ID || r[0].Snippet != "hello from <mark>lambda</mark>" {
		t.Errorf("search: %s", resp.Body)
	}

	// Stopping a reply that was never streamed: 404 GENERATION_NOT_FOUND.
	ev = lambdatest.LoadV2(t, "testdata/stop-reply.json")
	ev.RawPath = strings.Replace(ev.RawPath, "CHAT_ID", created.Data.ID, 1)
	ev.RequestContext.HTTP.Path = ev.RawPath
	ev.Cookies = cookie
	resp, err = invoke(ctx, ev)
	if err != nil || resp.StatusCode != 404 || !strings.Contains(resp.Body, `"code":"GENERATION_NOT_FOUND"`) {
		t.Errorf("stop: %d %s %v", resp.StatusCode, resp.Body, err)
	}

	// An attachment: created through an event, uploaded to the presigned
	// S3 URL, ready on its GET; the chat's delete removes its bytes.
	ev = lambdatest.LoadV2(t, "testdata/create-attachment.json")
	ev.RawPath = strings.Replace(ev.RawPath, "CHAT_ID", created.Data.ID, 1)
	ev.RequestContext.HTTP.Path = ev.RawPath
	ev.Cookies = cookie
	resp, err = invoke(ctx, ev)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create attachment: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	var att struct {
		Data struct {
			ID, Status, UploadURL, DownloadURL string
			UploadHeaders                      map[string]string
		}
	}
	lambdatest.DecodeBody(t, resp, &att)
	if att.Data.Status != "pending" || !strings.HasPrefix(att.Data.UploadURL, s3+"/blobs/uploads/"+me.User.ID+"/"+att.Data.ID+"?") {
		t.Fatalf("attachment = %+v", att.Data)
	}
	req, _ := http.NewRequest(http.MethodPut, att.Data.UploadURL, strings.NewReader("# Notes\n\nfrom Lambda!\n"))
	for k, v := range att.Data.UploadHeaders {
		req.Header.Set(k, v)
	}
	up, err := client.Do(req)
	if err != nil || up.StatusCode != 200 {
		t.Fatalf("upload to S3: %v %v", up, err)
	}
	up.Body.Close()
	getAtt := func() (int, string) {
		ev := lambdatest.LoadV2(t, "testdata/get-attachment.json")
		ev.RawPath = strings.NewReplacer("CHAT_ID", created.Data.ID, "ATTACHMENT_ID", att.Data.ID).Replace(ev.RawPath)
		ev.RequestContext.HTTP.Path = ev.RawPath
		ev.Cookies = cookie
		resp, err := invoke(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Body
	}
	status, body := getAtt()
	if status != 200 || !strings.Contains(body, `"status":"ready"`) {
		t.Fatalf("get attachment: %d %s", status, body)
	}
	var ready struct{ Data struct{ DownloadURL string } }
	if err := json.Unmarshal([]byte(body), &ready); err != nil {
		t.Fatal(err)
	}
	if b := download(t, ready.Data.DownloadURL); b != "# Notes\n\nfrom Lambda!\n" {
		t.Fatalf("download = %q", b)
	}
	ev = lambdatest.LoadV2(t, "testdata/delete-chat.json")
	ev.RawPath = strings.Replace(ev.RawPath, "CHAT_ID", created.Data.ID, 1)
	ev.RequestContext.HTTP.Path = ev.RawPath
	ev.Cookies = cookie
	if resp, err := invoke(ctx, ev); err != nil || resp.StatusCode != 204 {
		t.Fatalf("delete chat: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	if b := download(t, ready.Data.DownloadURL); b != "" {
		t.Fatalf("the attachment outlived its chat: %q", b)
	}

	if _, err := newHandler(ctx, func(k string) string { return map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "x"}[k] }); err == nil ||
		!strings.Contains(err.Error(), "DATA_TABLE") || !strings.Contains(err.Error(), "MCP_URL") || !strings.Contains(err.Error(), "BLOB_BUCKET") {
		t.Errorf("config error = %v", err)
	}
}

var client = &http.Client{Transport: &http.Transport{}}

// download returns the body of a 200 GET of url, "" for a 403 or 404.
func download(t *testing.T, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case 200:
		return string(b)
	case 403, 404:
		return ""
	}
	t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	return ""
}
