package faults_test

import (
	"testing"

	"github.com/workflowchat/service/shared/chat"
)

// monthUsage is the user's usage report of this month: its total.
func (e *env) monthUsage() (requests, tokens int) {
	var u struct {
		Total struct{ Requests, InputTokens, OutputTokens int }
	}
	e.ok(e.api, "GET", "/api/users/"+e.userID+"/usage", "", &u)
	return u.Total.Requests, u.Total.InputTokens + u.Total.OutputTokens
}

// TestFaultUsageOfUnsavedReply: a reply whose save fails (the Data
// table's transactions fail while the Users table works) still counts the
// tokens its model call spent: the usage is settled right after the call,
// not in the transaction that stores the reply.
func TestFaultUsageOfUnsavedReply(t *testing.T) {
	t.Parallel()
	t.Run("whole message", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		chatID := e.createChat()
		// The generation's lease is taken; storing the exchange fails.
		e.proxy.add(rule{op: "TransactWriteItems", table: e.cfg.DataTable, skip: 1, times: -1, fault: internal})
		resp, body := e.as(e.api, "POST", "/api/chats/"+chatID+"/messages", `{"content":"hello there","modelId":"builtin"}`)
		e.proxy.clear()
		if resp.StatusCode != 503 {
			t.Fatalf("send with its save failing: %d %s, want 503", resp.StatusCode, body)
		}
		if n := len(e.messages(chatID)); n != 0 {
			t.Fatalf("%d messages stored, want none", n)
		}
		if req, tokens := e.monthUsage(); req != 1 || tokens == 0 {
			t.Errorf("usage after the unsaved reply: %d requests, %d tokens; want its model call", req, tokens)
		}
	})
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		chatID := e.createChat()
		// The start (the chat's mark, an UpdateItem, and the messages'
		// transaction) passes; every PutItem after it (the log, the
		// save) fails.
		e.proxy.add(rule{op: "PutItem", table: e.cfg.DataTable, times: -1, fault: internal})
		resp, evs, body := e.stream(e.api, chatID, streamBody(e, "count to 20 slowly", ""), streamDeadline)
		e.proxy.clear()
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		requireEvents(t, evs, chat.EventStart, chat.EventError, chat.EventEnd)
		if msgs := e.messages(chatID); len(msgs) != 2 || msgs[1].Status != chat.StatusStreaming {
			t.Fatalf("messages %+v, want the reply never saved", msgs)
		}
		if req, tokens := e.monthUsage(); req != 1 || tokens == 0 {
			t.Errorf("usage after the unsaved reply: %d requests, %d tokens; want its model call", req, tokens)
		}
	})
}
