package e2e_test

import (
	"testing"
)

// TestPathBeforeBody: on every route group with a body, the path is
// checked before the body. A malformed id is 400 INVALID_ID whatever the
// body; a path naming another user is 403 whatever the body; a chat,
// workflow or trigger of another user is known only after a read, so its
// body's 400 comes first (401, then 400 ids and body, then 404, then 403).
func TestPathBeforeBody(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ada, eve := newClient(t, srv.API), newClient(t, srv.API)
	adaID := signUpChatUser(t, ada, "ada-order@example.com")
	signUpChatUser(t, eve, "eve-order@example.com")
	anon := newClient(t, srv.API)
	chat := newChat(t, ada, map[string]string{"title": "mine"})
	wf := createWorkflow(t, ada, adaID, "mine")
	trig := createTrigger(t, ada, wf.ID, `{"type":"webhook"}`)
	const bad, someID = "not-a-uuid", "3f1e2d4c-5b6a-4789-8abc-def012345678"
	// Each body is malformed or wrongly typed: were it read first, the
	// answer would be INVALID_JSON or VALIDATION_FAILED.
	const broken, mistyped = `{`, `{"title":5,"content":5,"name":5,"modelId":5,"policy":5,"remember":"x","fromStepId":5,"approved":"x","proposalId":5,"type":5}`
	type row struct {
		name   string
		c      *client
		method string
		path   string
		body   string
		status int
		code   string
	}
	groups := map[string][]row{
		"chats": {
			{"no session first", anon, "PATCH", "/api/chats/" + bad, broken, 401, "UNAUTHORIZED"},
			{"rename, bad id", ada, "PATCH", "/api/chats/" + bad, broken, 400, "INVALID_ID"},
			{"rename, bad id, mistyped", ada, "PATCH", "/api/chats/" + bad, mistyped, 400, "INVALID_ID"},
			{"send, bad id", ada, "POST", "/api/chats/" + bad + "/messages", broken, 400, "INVALID_ID"},
			{"stream, bad id", ada, "POST", "/api/chats/" + bad + "/messages/stream", broken, 400, "INVALID_ID"},
			{"approve, bad id", ada, "POST", "/api/chats/" + bad + "/tool-calls/c1/approve", broken, 400, "INVALID_ID"},
			{"deny, bad id", ada, "POST", "/api/chats/" + bad + "/tool-calls/c1/deny", mistyped, 400, "INVALID_ID"},
			{"approve, bad body", ada, "POST", "/api/chats/" + chat.ID + "/tool-calls/c1/approve", broken, 400, "INVALID_JSON"},
			{"another user's chat: the body's 400 first", eve, "PATCH", "/api/chats/" + chat.ID, broken, 400, "INVALID_JSON"},
			{"another user's chat", eve, "PATCH", "/api/chats/" + chat.ID, `{"title":"x"}`, 403, "FORBIDDEN"},
		},
		"attachments": {
			{"no session first", anon, "POST", "/api/chats/" + bad + "/attachments", broken, 401, "UNAUTHORIZED"},
			{"create, bad id", ada, "POST", "/api/chats/" + bad + "/attachments", broken, 400, "INVALID_ID"},
			{"create, bad id, mistyped", ada, "POST", "/api/chats/" + bad + "/attachments", mistyped, 400, "INVALID_ID"},
			{"another user's chat: the body's 400 first", eve, "POST", "/api/chats/" + chat.ID + "/attachments", broken, 400, "INVALID_JSON"},
			{"another user's chat", eve, "POST", "/api/chats/" + chat.ID + "/attachments", `{"name":"a.txt","contentType":"text/plain","size":3}`, 403, "FORBIDDEN"},
		},
		"users": {
			{"preference, no session first", anon, "POST", "/api/users/" + adaID + "/model-preference", broken, 401, "UNAUTHORIZED"},
			{"preference, another user's", eve, "POST", "/api/users/" + adaID + "/model-preference", broken, 403, "FORBIDDEN"},
			{"preference, another user's, mistyped", eve, "POST", "/api/users/" + adaID + "/model-preference", mistyped, 403, "FORBIDDEN"},
			{"preference, another user's, unknown model", eve, "POST", "/api/users/" + adaID + "/model-preference", `{"modelId":"nope"}`, 403, "FORBIDDEN"},
			{"preference, bad id", ada, "POST", "/api/users/" + bad + "/model-preference", broken, 400, "INVALID_ID"},
			{"permission, another user's", eve, "PUT", "/api/users/" + adaID + "/tool-permissions/hash", broken, 403, "FORBIDDEN"},
			{"permission, another user's, bad policy", eve, "PUT", "/api/users/" + adaID + "/tool-permissions/hash", `{"policy":"x"}`, 403, "FORBIDDEN"},
			{"permission, bad id", ada, "PUT", "/api/users/" + bad + "/tool-permissions/hash", mistyped, 400, "INVALID_ID"},
			{"token, another user's", eve, "POST", "/api/users/" + adaID + "/tokens", broken, 403, "FORBIDDEN"},
			{"token, bad id", ada, "POST", "/api/users/" + bad + "/tokens", broken, 400, "INVALID_ID"},
		},
		"workflows": {
			{"update, bad id", ada, "PATCH", "/api/workflows/" + bad, broken, 400, "INVALID_ID"},
			{"message, bad id", ada, "POST", "/api/workflows/" + bad + "/messages", broken, 400, "INVALID_ID"},
			{"apply, bad id", ada, "POST", "/api/workflows/" + bad + "/messages/apply", mistyped, 400, "INVALID_ID"},
			{"reject, bad id", ada, "POST", "/api/workflows/" + bad + "/messages/reject", broken, 400, "INVALID_ID"},
			{"another user's workflow: the body's 400 first", eve, "POST", "/api/workflows/" + wf.ID + "/messages/apply", broken, 400, "INVALID_JSON"},
		},
		"triggers": {
			{"create, bad workflow id", ada, "POST", "/api/workflows/" + bad + "/triggers", broken, 400, "INVALID_ID"},
			{"update, bad trigger id", ada, "PATCH", "/api/workflows/" + wf.ID + "/triggers/" + bad, mistyped, 400, "INVALID_ID"},
			{"rotate, bad trigger id", ada, "POST", "/api/workflows/" + wf.ID + "/triggers/" + bad + "/rotate-secret", broken, 400, "INVALID_ID"},
			{"rotate, bad body", ada, "POST", "/api/workflows/" + wf.ID + "/triggers/" + trig.ID + "/rotate-secret", broken, 400, "INVALID_JSON"},
		},
		"runs": {
			{"retry, bad chat id", ada, "POST", "/api/chats/" + bad + "/workflow-runs/" + someID + "/retry", broken, 400, "INVALID_ID"},
			{"retry, bad run id", ada, "POST", "/api/chats/" + chat.ID + "/workflow-runs/" + bad + "/retry", broken, 400, "INVALID_ID"},
			{"retry, bad workflow id", ada, "POST", "/api/workflows/" + bad + "/runs/" + someID + "/retry", mistyped, 400, "INVALID_ID"},
			{"respond, bad run id", ada, "POST", "/api/workflows/" + wf.ID + "/runs/" + bad + "/steps/s1/respond", broken, 400, "INVALID_ID"},
		},
	}
	for group, rows := range groups {
		t.Run(group, func(t *testing.T) {
			for _, tc := range rows {
				tc.c.t = t
				expectError(t, group+": "+tc.name, tc.c.do(tc.method, tc.path, tc.body), tc.status, tc.code)
			}
		})
	}
}
