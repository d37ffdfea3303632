package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"time"
)

// Route names, as in docs/openapi.yaml. The report lists them in this order.
const (
	routeLiveness    = "GET /api/liveness"
	routeSignUp      = "POST /api/auth/sign-up/email"
	routeSignIn      = "POST /api/auth/sign-in/email"
	routeSignOut     = "POST /api/auth/sign-out"
	routeSession     = "GET /api/auth/session"
	routeListChats   = "GET /api/users/{userId}/chats"
	routeCreateChat  = "POST /api/chats"
	routeDeleteChat  = "DELETE /api/chats/{chatId}"
	routeSend        = "POST /api/chats/{chatId}/messages"
	routeStream      = "POST /api/chats/{chatId}/messages/stream"
	routeMessages    = "GET /api/chats/{chatId}/messages"
	routeTools       = "GET /api/tools"
	routeWfCreate    = "POST /api/workflows"
	routeWfMessage   = "POST /api/workflows/{workflowId}/messages"
	routeWfApply     = "POST /api/workflows/{workflowId}/messages/apply"
	routeWfRun       = "POST /api/chats/{chatId}/workflow-runs"
	routeWfDelete    = "DELETE /api/workflows/{workflowId}"
	floorRoute       = routeLiveness
	chatPageLimit    = 20
	maxChatsPerUser  = 2  // a user's oldest chat is deleted beyond this
	maxChatMessages  = 20 // a chat this long is replaced by a new one
	requestTimeout   = 30 * time.Second
	userPasswordText = "load-test-password"
)

// routeOrder is the report's row order.
var routeOrder = []string{
	routeLiveness, routeSignUp, routeSignIn, routeSignOut, routeSession, routeListChats, routeCreateChat, routeDeleteChat,
	routeSend, routeStream, routeMessages, routeTools, routeWfCreate, routeWfMessage, routeWfApply, routeWfRun, routeWfDelete,
}

// op is one entry of the mix: a weight and what a user does.
type op struct {
	name   string
	weight int
	run    func(*vu) error
}

// mix is the weighted mix of what a signed-in user does. Reads dominate,
// as in a chat product; sign-in (argon2id) is rare. Creating chats
// deletes old ones, and signing in signs out first, so that the data a
// long run creates stays bounded (see the soak mode).
func mix(workflows bool) []op {
	ops := []op{
		{"liveness", 10, (*vu).liveness},
		{"session", 10, (*vu).session},
		{"list chats", 10, (*vu).listChats},
		{"create chat", 3, (*vu).newChat},
		{"send message", 8, (*vu).send},
		{"stream", 8, (*vu).stream},
		{"list messages", 8, (*vu).messages},
		{"tools", 6, (*vu).tools},
		{"sign in again", 1, (*vu).signInAgain},
	}
	if workflows {
		ops = append(ops, op{"workflow", 2, (*vu).workflow})
	}
	return ops
}

// vu is one virtual user: its own account, cookie jar and chats.
type vu struct {
	n      int
	base   string
	client *http.Client
	rec    *Recorder
	rng    *rand.Rand

	email, userID string
	chats         []string       // oldest first
	msgs          map[string]int // messages per chat
}

func newVU(n int, base, runID string, rec *Recorder, transport http.RoundTripper) *vu {
	jar, _ := cookiejar.New(nil)
	return &vu{
		n: n, base: base, rec: rec,
		client: &http.Client{Jar: jar, Transport: transport, Timeout: requestTimeout},
		rng:    rand.New(rand.NewPCG(uint64(n), uint64(time.Now().UnixNano()))),
		email:  fmt.Sprintf("load-%s-%d@example.com", runID, n),
		msgs:   map[string]int{},
	}
}

// response is a received response with its body read, and how long the
// whole exchange took.
type response struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

// call sends one request and reads the whole answer. body is JSON-encoded
// unless nil.
func (u *vu) call(method, path string, body any) (response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, u.base+path, rd)
	if err != nil {
		return response{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := u.client.Do(req)
	if err != nil {
		return response{took: time.Since(start)}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b, took: time.Since(start)}, err
}

// do sends a request, checks the answer with check and records the
// outcome under route.
func (u *vu) do(route, method, path string, body any, check func(response) error) error {
	r, err := u.call(method, path, body)
	if err == nil {
		err = check(r)
	}
	if err != nil {
		err = fmt.Errorf("user %d: %s %s: %w", u.n, method, path, err)
	}
	u.rec.Record(route, r.took, err)
	return err
}

// setup signs the user up and creates maxChatsPerUser chats.
func (u *vu) setup() error {
	err := u.do(routeSignUp, "POST", "/api/auth/sign-up/email",
		map[string]string{"email": u.email, "password": userPasswordText, "name": fmt.Sprintf("Load user %d", u.n)},
		func(r response) error {
			var s sessionResponse
			if err := decodeData(r.status, r.body, http.StatusOK, &s); err != nil {
				return err
			}
			u.userID = s.User.ID
			return checkSession(s, "", u.email)
		})
	for err == nil && len(u.chats) < maxChatsPerUser {
		err = u.newChat()
	}
	return err
}

// loop runs the mix until deadline, starting with one pass over every
// operation so that a short run exercises every route.
func (u *vu) loop(deadline time.Time, ops []op, stop <-chan struct{}) {
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	for i := 0; time.Now().Before(deadline); i++ {
		select {
		case <-stop:
			return
		default:
		}
		var o op
		if i < len(ops) {
			o = ops[i]
		} else {
			w := u.rng.IntN(total)
			for _, o = range ops {
				if w -= o.weight; w < 0 {
					break
				}
			}
		}
		_ = o.run(u) // recorded by do; the loop carries on
	}
}

func (u *vu) liveness() error {
	return u.do(routeLiveness, "GET", "/api/liveness", nil, func(r response) error { return checkLiveness(r.status, r.body) })
}

func (u *vu) session() error {
	return u.do(routeSession, "GET", "/api/auth/session", nil, func(r response) error {
		var s sessionResponse
		if err := decodeData(r.status, r.body, http.StatusOK, &s); err != nil {
			return err
		}
		return checkSession(s, u.userID, u.email)
	})
}

// signInAgain signs out (deleting the session server-side) and in again.
func (u *vu) signInAgain() error {
	err := u.do(routeSignOut, "POST", "/api/auth/sign-out", nil, func(r response) error {
		var res struct {
			Success bool `json:"success"`
		}
		if err := decodeData(r.status, r.body, http.StatusOK, &res); err != nil {
			return err
		}
		if !res.Success {
			return errors.New("success is not true")
		}
		return nil
	})
	if err != nil {
		return err
	}
	return u.do(routeSignIn, "POST", "/api/auth/sign-in/email", map[string]string{"email": u.email, "password": userPasswordText},
		func(r response) error {
			var s sessionResponse
			if err := decodeData(r.status, r.body, http.StatusOK, &s); err != nil {
				return err
			}
			return checkSession(s, u.userID, u.email)
		})
}

func (u *vu) listChats() error {
	path := fmt.Sprintf("/api/users/%s/chats?limit=%d", u.userID, chatPageLimit)
	return u.do(routeListChats, "GET", path, nil, func(r response) error {
		var p chatPage
		if err := decodeData(r.status, r.body, http.StatusOK, &p); err != nil {
			return err
		}
		return checkChatPage(p, u.userID, chatPageLimit, u.chats)
	})
}

// newChat creates a chat, deleting the oldest first when the user has
// maxChatsPerUser.
func (u *vu) newChat() error {
	if len(u.chats) >= maxChatsPerUser {
		old := u.chats[0]
		err := u.do(routeDeleteChat, "DELETE", "/api/chats/"+old, nil, func(r response) error {
			if err := checkStatus(r.status, r.body, http.StatusNoContent); err != nil {
				return err
			}
			if len(r.body) != 0 {
				return fmt.Errorf("204 with a body %.100q", r.body)
			}
			return nil
		})
		if err != nil {
			return err
		}
		u.chats = u.chats[1:]
		delete(u.msgs, old)
	}
	title := fmt.Sprintf("Load chat %d", u.rng.IntN(1_000_000))
	return u.do(routeCreateChat, "POST", "/api/chats", map[string]string{"title": title}, func(r response) error {
		var c chatResource
		if err := decodeData(r.status, r.body, http.StatusCreated, &c); err != nil {
			return err
		}
		if err := checkChat(c, u.userID, title); err != nil {
			return err
		}
		u.chats = append(u.chats, c.ID)
		return nil
	})
}

// chat returns a chat to post to, replacing the newest chat by a new one
// when it is long.
func (u *vu) chat() (string, error) {
	if len(u.chats) == 0 || u.msgs[u.chats[len(u.chats)-1]] >= maxChatMessages {
		if err := u.newChat(); err != nil {
			return "", err
		}
	}
	return u.chats[len(u.chats)-1], nil
}

// prompt is a plain question, or one time in four the tool prompt.
func (u *vu) prompt() string {
	if u.rng.IntN(4) == 0 {
		return toolPrompt
	}
	return fmt.Sprintf("Summarise load test item %d in one sentence, please.", u.rng.IntN(1_000_000))
}

func (u *vu) send() error {
	id, err := u.chat()
	if err != nil {
		return err
	}
	content := u.prompt()
	return u.do(routeSend, "POST", "/api/chats/"+id+"/messages", map[string]string{"content": content, "modelId": "builtin", "userId": u.userID},
		func(r response) error {
			u.msgs[id] += 2 // stored even if the answer were wrong
			var x exchange
			if err := decodeData(r.status, r.body, http.StatusCreated, &x); err != nil {
				return err
			}
			return checkExchange(x, id, content)
		})
}

// stream posts to the stream route and checks the events as they come,
// then reads the chat's messages back to check the stored reply.
func (u *vu) stream() error {
	id, err := u.chat()
	if err != nil {
		return err
	}
	content := u.prompt()
	b, _ := json.Marshal(map[string]string{"content": content, "modelId": "builtin", "userId": u.userID})
	req, err := http.NewRequest("POST", u.base+"/api/chats/"+id+"/messages/stream", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	var res streamResult
	err = func() error {
		resp, err := u.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			return checkStatus(resp.StatusCode, body, http.StatusOK)
		}
		u.msgs[id] += 2
		if err := checkStreamHeaders(resp.StatusCode, resp.Header, nil); err != nil {
			return err
		}
		evs, err := readStream(resp.Body)
		if err != nil {
			return err
		}
		res, err = checkStream(evs, content)
		return err
	}()
	if err != nil {
		err = fmt.Errorf("user %d: POST stream of chat %s: %w", u.n, id, err)
	}
	u.rec.Record(routeStream, time.Since(start), err)
	if err != nil {
		return err
	}
	return u.listMessages(id, &res)
}

// messages lists the messages of one of the user's chats.
func (u *vu) messages() error {
	if len(u.chats) == 0 {
		return u.newChat()
	}
	return u.listMessages(u.chats[u.rng.IntN(len(u.chats))], nil)
}

func (u *vu) listMessages(id string, last *streamResult) error {
	return u.do(routeMessages, "GET", "/api/chats/"+id+"/messages", nil, func(r response) error {
		var l struct {
			Messages []message `json:"messages"`
		}
		if err := decodeData(r.status, r.body, http.StatusOK, &l); err != nil {
			return err
		}
		return checkMessages(l.Messages, id, u.msgs[id], last)
	})
}

func (u *vu) tools() error {
	return u.do(routeTools, "GET", "/api/tools", nil, func(r response) error {
		var l struct {
			Tools []tool `json:"tools"`
		}
		if err := decodeData(r.status, r.body, http.StatusOK, &l); err != nil {
			return err
		}
		return checkTools(l.Tools)
	})
}

// workflowPrompt asks the assistant of a workflow chat for a step.
const workflowPrompt = `add a step using json_query with {"input": {"a": 1}, "query": ".a"}`

// workflow creates a workflow, asks its assistant for a json_query step,
// applies the proposal, runs the workflow from a chat, and deletes the
// workflow again (so that long runs stay bounded).
func (u *vu) workflow() error {
	var wfID string
	err := u.do(routeWfCreate, "POST", "/api/workflows", map[string]string{"userId": u.userID, "name": "Load workflow"}, func(r response) error {
		var w workflowResource
		if err := decodeData(r.status, r.body, http.StatusCreated, &w); err != nil {
			return err
		}
		if !isUUID(w.ID) || w.UserID != u.userID || w.Steps == nil || len(*w.Steps) != 0 {
			return fmt.Errorf("created workflow %+v, want an empty workflow of %s", w, u.userID)
		}
		wfID = w.ID
		return nil
	})
	if err != nil {
		return err
	}
	defer func() {
		_ = u.do(routeWfDelete, "DELETE", "/api/workflows/"+wfID, nil, func(r response) error {
			return checkStatus(r.status, r.body, http.StatusNoContent)
		})
	}()
	var proposalID string
	err = u.do(routeWfMessage, "POST", "/api/workflows/"+wfID+"/messages", map[string]string{"content": workflowPrompt, "modelId": "builtin"}, func(r response) error {
		var x struct {
			UserMessage      struct{ ID, Role, Content string } `json:"userMessage"`
			AssistantMessage struct {
				ID, Role string
				Proposal *struct {
					ID      string            `json:"id"`
					Status  string            `json:"status"`
					Changes []json.RawMessage `json:"changes"`
				} `json:"proposal"`
			} `json:"assistantMessage"`
		}
		if err := decodeData(r.status, r.body, http.StatusCreated, &x); err != nil {
			return err
		}
		p := x.AssistantMessage.Proposal
		if x.UserMessage.Content != workflowPrompt || p == nil || !isUUID(p.ID) || p.Status != "pending" || len(p.Changes) != 1 {
			return fmt.Errorf("workflow message answer %.300q, want a pending proposal with one change", r.body)
		}
		proposalID = p.ID
		return nil
	})
	if err != nil {
		return err
	}
	err = u.do(routeWfApply, "POST", "/api/workflows/"+wfID+"/messages/apply", map[string]string{"proposalId": proposalID}, func(r response) error {
		var a struct {
			Proposal struct{ ID, Status string } `json:"proposal"`
			Workflow workflowResource            `json:"workflow"`
		}
		if err := decodeData(r.status, r.body, http.StatusOK, &a); err != nil {
			return err
		}
		if a.Proposal.ID != proposalID || a.Proposal.Status != "applied" || a.Workflow.Steps == nil || len(*a.Workflow.Steps) != 1 || (*a.Workflow.Steps)[0].ToolID != "json_query" {
			return fmt.Errorf("apply answer %.300q, want the applied proposal and one json_query step", r.body)
		}
		return nil
	})
	if err != nil {
		return err
	}
	chatID, err := u.chat()
	if err != nil {
		return err
	}
	return u.do(routeWfRun, "POST", "/api/chats/"+chatID+"/workflow-runs", map[string]string{"workflowId": wfID}, func(r response) error {
		var run struct {
			ID, ChatID, WorkflowID, Status string
			Steps                          []struct {
				ID, Status string
				Output     json.RawMessage `json:"output"`
			} `json:"steps"`
		}
		if err := decodeData(r.status, r.body, http.StatusCreated, &run); err != nil {
			return err
		}
		if run.ChatID != chatID || run.WorkflowID != wfID || run.Status != "completed" || len(run.Steps) != 1 || run.Steps[0].Status != "completed" {
			return fmt.Errorf("run %.300q, want one completed json_query step", r.body)
		}
		return nil
	})
}

type workflowResource struct {
	ID     string `json:"id"`
	UserID string `json:"userId"`
	Steps  *[]struct {
		ID     string `json:"id"`
		ToolID string `json:"toolId"`
	} `json:"steps"`
}

// missingRoutes reports which of the routes the mix should have reached were
// never recorded.
func missingRoutes(rep Report, workflows bool) []string {
	want := []string{routeLiveness, routeSignUp, routeSignIn, routeSignOut, routeSession, routeListChats, routeCreateChat, routeDeleteChat, routeSend, routeStream, routeMessages, routeTools}
	if workflows {
		want = append(want, routeWfCreate, routeWfMessage, routeWfApply, routeWfRun, routeWfDelete)
	}
	var missing []string
	for _, w := range want {
		if !slices.ContainsFunc(rep.Routes, func(r RouteResult) bool { return r.Route == w && r.Count > 0 }) {
			missing = append(missing, w)
		}
	}
	return missing
}
