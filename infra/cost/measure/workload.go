// Package measure is the workload make cost measures and the in-process
// half of its measurement. The workload (Run) is a client's requests
// through a Host: streamed replies of two lengths from a stand-in model
// that streams at a model's pace (StartModel: the OpenAI provider against
// a local OpenAI-compatible server), durable workflow runs of json_query
// steps, and scheduled sweeps of an idle service. Two hosts run it: the
// functions' real bootstraps under the Lambda Runtime Interface Emulator
// (infra/lambdart's TestCostWorkload: durations, peak memory, requests,
// bytes, logs), and the dev server's stack in this process (InProcess:
// the DynamoDB capacity every call reports, through store.CapacityMeter).
package measure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The kinds of unit the workload measures; a Recorder is told when each
// unit begins and ends.
const (
	KindShort    = "short reply"
	KindLong     = "long reply"
	KindRun      = "workflow run"
	KindSweep    = "idle sweep"
	KindFire     = "schedule fire"
	KindSetup    = "setup"    // sign-up, chats, the workflow: not priced
	KindWarmUp   = "warm-up"  // the first unit of each kind: not priced
	KindCoverage = "coverage" // a request to each other function, for its peak memory: not priced
)

// The stand-in model's names (OPENAI_MODELS) and their registry ids.
const (
	ShortModel = "reply-short"
	LongModel  = "reply-long"
)

// Workload is what make cost measures.
type Workload struct {
	// Short and Long are the tokens of the two replies.
	Short, Long int
	// Pace is the stand-in model's.
	Pace Pace
	// Steps are the json_query steps of the workflow each run runs.
	Steps int
	// Samples are the units measured of each kind, after one warm-up
	// unit of each.
	Samples Samples
	// Coverage adds a request to every function the priced work does not
	// use, so that each has a measured peak (the emulator only).
	Coverage bool
}

// Samples counts the units measured of each kind.
type Samples struct{ Short, Long, Runs, Sweeps, Fires int }

// Default is make cost's workload: replies of 150 and 1,200 tokens from a
// model that answers its first token after 0.5 s and then 60 tokens a
// second (a current model's pace), runs of 5 steps.
var Default = Workload{Short: 150, Long: 1200, Pace: Pace{FirstToken: 500 * time.Millisecond, TokensPerSecond: 60}, Steps: 5,
	Samples: Samples{Short: 5, Long: 3, Runs: 5, Sweeps: 5, Fires: 5}, Coverage: true}

// Tiny is a workload of a few seconds, for tests; its coverage requests
// keep make cost's working.
var Tiny = Workload{Short: 8, Long: 24, Pace: Pace{FirstToken: 10 * time.Millisecond, TokensPerSecond: 400}, Steps: 2,
	Samples: Samples{Short: 1, Long: 1, Runs: 1, Sweeps: 1, Fires: 1}, Coverage: true}

// Models are the stand-in model's models and their tokens.
func (w Workload) Models() map[string]int {
	return map[string]int{ShortModel: w.Short, LongModel: w.Long}
}

// Env is the configuration every host gives the functions, beside their
// own: the stand-in model at modelURL (StartModel's) and rate limits the
// workload stays under (each limit still costs its DynamoDB write).
func Env(modelURL string) map[string]string {
	return map[string]string{"OPENAI_BASE_URL": modelURL + "/v1", "OPENAI_MODELS": ShortModel + "," + LongModel,
		"RATE_LIMIT_MESSAGES": "1000/m", "RATE_LIMIT_STREAMS": "1000/m", "RATE_LIMIT_RUNS": "1000/m"}
}

// Host runs the service's functions for the workload.
type Host interface {
	// Do serves r (its body read whole) by the HTTP function fn (its
	// folder under functions/), as a client's request reaches it, and
	// returns the answer whole.
	Do(ctx context.Context, fn string, r *http.Request) (*Response, error)
	// Invoke runs the function fn that serves no HTTP ("sweeper",
	// "triggerfire") on event.
	Invoke(ctx context.Context, fn string, event any) error
	// Settle waits for what the requests started in the background
	// (durable runs) to end.
	Settle(ctx context.Context) error
}

// Response is an answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Recorder is told when each unit of work begins and ends.
type Recorder interface {
	Begin(kind string)
	End(kind string)
}

// Run runs w through h, telling rec when each unit begins and ends:
// first the idle sweeps (nothing stored yet), then the setup (a user, a
// chat for each reply length and one for the runs, the workflow), the
// coverage requests, and the replies and runs, one warm-up unit of each
// kind first. It fails when an answer is not what the service answers.
func Run(ctx context.Context, h Host, w Workload, rec Recorder) error {
	unit := func(kind string, i int, do func() error) error {
		k := kind
		if i == 0 {
			k = KindWarmUp
		}
		rec.Begin(k)
		err := do()
		if err == nil {
			err = h.Settle(ctx)
		}
		rec.End(k)
		if err != nil {
			return fmt.Errorf("%s %d: %w", kind, i, err)
		}
		return nil
	}
	for i := range w.Samples.Sweeps + 1 {
		if err := unit(KindSweep, i, func() error { return h.Invoke(ctx, "sweeper", ScheduledEvent()) }); err != nil {
			return err
		}
	}

	rec.Begin(KindSetup)
	c, err := signUp(ctx, h)
	var chats [3]string
	var workflowID, scheduleID string
	for i := range chats {
		if err == nil {
			chats[i], err = c.id(ctx, "chats", "POST", "/api/chats", map[string]any{"title": fmt.Sprintf("cost %d", i)}, http.StatusCreated)
		}
	}
	if err == nil {
		workflowID, err = c.id(ctx, "workflows", "POST", "/api/workflows", map[string]any{"userId": c.userID, "name": "cost", "steps": steps(w.Steps)}, http.StatusCreated)
	}
	// A schedule of its own (rate(1 minute), the least period) on a
	// workflow of one json_query step: each fire is TriggerFireFunction's
	// invocation, as EventBridge Scheduler makes it, and the run it starts.
	var fireWorkflow string
	if err == nil {
		fireWorkflow, err = c.id(ctx, "workflows", "POST", "/api/workflows", map[string]any{"userId": c.userID, "name": "scheduled", "steps": steps(1)}, http.StatusCreated)
	}
	if err == nil {
		scheduleID, err = c.id(ctx, "triggers", "POST", "/api/workflows/"+fireWorkflow+"/triggers",
			map[string]any{"type": "schedule", "schedule": "rate(1 minute)", "enabled": true}, http.StatusCreated)
	}
	rec.End(KindSetup)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	if w.Coverage {
		rec.Begin(KindCoverage)
		err := c.coverage(ctx, h, chats[0], workflowID)
		rec.End(KindCoverage)
		if err != nil {
			return fmt.Errorf("coverage: %w", err)
		}
	}
	for i := range w.Samples.Short + 1 {
		if err := unit(KindShort, i, func() error { return c.reply(ctx, chats[0], ShortModel, w.Short) }); err != nil {
			return err
		}
	}
	for i := range w.Samples.Long + 1 {
		if err := unit(KindLong, i, func() error { return c.reply(ctx, chats[1], LongModel, w.Long) }); err != nil {
			return err
		}
	}
	for i := range w.Samples.Runs + 1 {
		if err := unit(KindRun, i, func() error { return c.run(ctx, chats[2], workflowID, w.Steps) }); err != nil {
			return err
		}
	}
	first := time.Now().UTC().Truncate(time.Minute)
	for i := range w.Samples.Fires + 1 {
		ev := FireEvent(scheduleID, first.Add(time.Duration(i)*time.Minute))
		if err := unit(KindFire, i, func() error { return h.Invoke(ctx, "triggerfire", ev) }); err != nil {
			return err
		}
	}
	return nil
}

// FireEvent is EventBridge Scheduler's event for a schedule trigger's
// fire due at at: the trigger's id, its version (1: never changed) and
// the scheduled time.
func FireEvent(triggerID string, at time.Time) map[string]any {
	return map[string]any{"triggerId": triggerID, "version": 1, "scheduledTime": at.Format(time.RFC3339)}
}

// ScheduledEvent is the sweeper's schedule tick, as EventBridge sends it.
func ScheduledEvent() map[string]any {
	return map[string]any{"version": "0", "id": "cost-sweep", "detail-type": "Scheduled Event", "source": "aws.events",
		"account": "123456789012", "time": time.Now().UTC().Format(time.RFC3339), "region": "us-east-1", "resources": []string{}, "detail": map[string]any{}}
}

// steps are a workflow of n json_query steps, each reading the previous
// step's result through a template.
func steps(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		in := any([]int{1, 2, 3, 4, 5, 6, 7, 8})
		if i > 0 {
			in = fmt.Sprintf("{{s%d.result}}", i)
		}
		out[i] = map[string]any{"id": fmt.Sprintf("s%d", i+1), "toolId": "json_query", "inputs": map[string]any{"input": in, "query": "map(. + 1)"}}
	}
	return out
}

// client is the workload's signed-in user.
type client struct {
	h              Host
	cookie, userID string
}

func signUp(ctx context.Context, h Host) (*client, error) {
	c := &client{h: h}
	resp, err := c.do(ctx, "auth", "POST", "/api/auth/sign-up/email", map[string]any{"email": "cost@example.com", "password": "cost-password-1", "name": "Cost"}, http.StatusOK)
	if err != nil {
		return nil, err
	}
	for _, ck := range (&http.Response{Header: resp.Header}).Cookies() {
		if ck.Name == "session_token" {
			c.cookie = ck.Name + "=" + ck.Value
		}
	}
	var body struct {
		Data struct{ User struct{ ID string } }
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil || c.cookie == "" || body.Data.User.ID == "" {
		return nil, fmt.Errorf("sign-up: no session or user in %.300s (%v)", resp.Body, err)
	}
	c.userID = body.Data.User.ID
	return c, nil
}

// do sends a request as the user and checks its status.
func (c *client) do(ctx context.Context, fn, method, path string, body any, status int, header ...string) (*Response, error) {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	r, err := http.NewRequestWithContext(ctx, method, "https://api.example.com"+path, nil)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		r, _ = http.NewRequestWithContext(ctx, method, "https://api.example.com"+path, rd)
		r.Header.Set("Content-Type", "application/json")
	}
	if c.cookie != "" {
		r.Header.Set("Cookie", c.cookie)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	resp, err := c.h.Do(ctx, fn, r)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.Status != status {
		return nil, fmt.Errorf("%s %s: %d, want %d: %.500s", method, path, resp.Status, status, resp.Body)
	}
	return resp, nil
}

// id sends a request and returns the data.id of its answer.
func (c *client) id(ctx context.Context, fn, method, path string, body any, status int) (string, error) {
	resp, err := c.do(ctx, fn, method, path, body, status)
	if err != nil {
		return "", err
	}
	var out struct{ Data struct{ ID string } }
	if err := json.Unmarshal(resp.Body, &out); err != nil || out.Data.ID == "" {
		return "", fmt.Errorf("%s %s: no id in %.300s", method, path, resp.Body)
	}
	return out.Data.ID, nil
}

// reply streams a reply of model in chat and checks that its events
// carry the model's whole text and end.
func (c *client) reply(ctx context.Context, chat, model string, tokens int) error {
	resp, err := c.do(ctx, "stream", "POST", "/api/chats/"+chat+"/messages/stream",
		map[string]any{"content": "Answer at the length you were made for.", "modelId": "openai/" + model, "userId": c.userID}, http.StatusOK)
	if err != nil {
		return err
	}
	var text strings.Builder
	ended := false
	for _, line := range strings.Split(string(resp.Body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct{ Type, Delta string }
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		switch ev.Type {
		case "content":
			text.WriteString(ev.Delta)
		case "end":
			ended = true
		case "error":
			return fmt.Errorf("the reply failed: %s", data)
		}
	}
	if want := ReplyText(tokens); !ended || text.String() != want {
		return fmt.Errorf("the reply ended %v with %d bytes of text, want %d: %.300s", ended, text.Len(), len(want), resp.Body)
	}
	return nil
}

// run runs the workflow in chat, waiting for it, and checks that every
// step completed.
func (c *client) run(ctx context.Context, chat, workflowID string, n int) error {
	resp, err := c.do(ctx, "workflows", "POST", "/api/chats/"+chat+"/workflow-runs", map[string]any{"workflowId": workflowID}, http.StatusCreated)
	if err != nil {
		return err
	}
	var out struct {
		Data struct {
			Status string
			Steps  []struct{ Status string }
		}
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return err
	}
	done := 0
	for _, s := range out.Data.Steps {
		if s.Status == "completed" {
			done++
		}
	}
	if out.Data.Status != "completed" || done != n {
		return fmt.Errorf("the run is %s with %d of %d steps completed: %.500s", out.Data.Status, done, n, resp.Body)
	}
	return nil
}

// coverage sends a typical request to each function the priced work
// leaves out, so that each has a measured peak, and a run of a large
// value: health, sign-in and the session, the models and the tools, a
// whole reply and the messages (ChatsFunction), the workflow chat's
// proposal and its apply, a run whose one step
// outputs 7.96 MiB (near the isolated tools' 8 MiB cap), a webhook trigger, a schedule's fire, a personal
// access token (OAuthFunction) and the MCP gateway's tool list with it,
// and a knowledge base's document indexed (KnowledgeIndexFunction).
func (c *client) coverage(ctx context.Context, h Host, chat, workflowID string) error {
	var errs []error
	try := func(_ *Response, err error) { errs = append(errs, err) }
	try(c.do(ctx, "health", "GET", "/api/liveness", nil, http.StatusOK))
	try(c.do(ctx, "auth", "GET", "/api/auth/session", nil, http.StatusOK))
	try(c.do(ctx, "auth", "POST", "/api/auth/sign-in/email", map[string]any{"email": "cost@example.com", "password": "cost-password-1"}, http.StatusOK))
	try(c.do(ctx, "models", "GET", "/api/models", nil, http.StatusOK))
	try(c.do(ctx, "tools", "GET", "/api/tools", nil, http.StatusOK))
	try(c.do(ctx, "mcpservers", "GET", "/api/mcp-servers", nil, http.StatusOK))
	try(c.do(ctx, "knowledge", "GET", "/api/knowledge-bases", nil, http.StatusOK))
	try(c.do(ctx, "chats", "POST", "/api/chats/"+chat+"/messages", map[string]any{"content": "hello", "modelId": "openai/" + ShortModel}, http.StatusCreated))
	try(c.do(ctx, "chats", "GET", "/api/chats/"+chat+"/messages", nil, http.StatusOK))
	errs = append(errs, c.knowledge(ctx, h, chat))
	// The workflow chat: a proposal from the built-in model, applied
	// (JSON Schema validation of the changes).
	if draft, err := c.id(ctx, "workflows", "POST", "/api/workflows", map[string]any{"userId": c.userID, "name": "draft"}, http.StatusCreated); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, c.propose(ctx, draft))
	}
	// A run whose step's output is near the isolated tools' 8 MiB cap
	// (tools.SandboxMaxOutput; a step's output may be no larger): the
	// largest value a run's functions hold (runner, workflows, the tool
	// server). 930000 strings "123456" are 8,370,012 bytes of JSON with
	// {"result": ...}, 18,596 under the cap. They are made by one string
	// repeat and a split: half the jq CPU of [range(940000) | tostring],
	// which under -race on a loaded machine outran json_query's 10 s.
	large, err := c.id(ctx, "workflows", "POST", "/api/workflows", map[string]any{"userId": c.userID, "name": "large",
		"steps": []map[string]any{{"id": "big", "toolId": "json_query", "inputs": map[string]any{"input": []int{}, "query": `"123456," * 930000 | .[:-1] | split(",")`}}}}, http.StatusCreated)
	errs = append(errs, err)
	if err == nil {
		errs = append(errs, c.run(ctx, chat, large, 1))
	}
	trigger, err := c.id(ctx, "triggers", "POST", "/api/workflows/"+workflowID+"/triggers", map[string]any{"type": "webhook"}, http.StatusCreated)
	errs = append(errs, err)
	errs = append(errs, h.Invoke(ctx, "triggerfire", FireEvent(trigger, time.Now().UTC())))
	resp, err := c.do(ctx, "oauth", "POST", "/api/users/"+c.userID+"/tokens", map[string]any{"name": "cost", "expiresInDays": 1}, http.StatusCreated)
	errs = append(errs, err)
	if err == nil {
		var tok struct{ Data struct{ Token string } }
		if err := json.Unmarshal(resp.Body, &tok); err != nil || tok.Data.Token == "" {
			errs = append(errs, fmt.Errorf("no token in %.300s", resp.Body))
		} else {
			mcp := &client{h: h}
			try(mcp.do(ctx, "mcpgateway", "POST", "/api/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{}}, http.StatusOK,
				"Authorization", "Bearer "+tok.Data.Token, "Accept", "application/json, text/event-stream"))
		}
	}
	return errors.Join(errs...)
}

// propose asks the workflow's assistant (the built-in model) for a
// json_query step and applies its proposal.
func (c *client) propose(ctx context.Context, workflowID string) error {
	resp, err := c.do(ctx, "workflows", "POST", "/api/workflows/"+workflowID+"/messages",
		map[string]any{"content": `add a step using json_query with {"input": {"a": 1}, "query": ".a"}`, "modelId": "builtin"}, http.StatusCreated)
	if err != nil {
		return err
	}
	var out struct {
		Data struct {
			AssistantMessage struct {
				Proposal *struct{ ID string }
			}
		}
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil || out.Data.AssistantMessage.Proposal == nil {
		return fmt.Errorf("no proposal in %.300s", resp.Body)
	}
	_, err = c.do(ctx, "workflows", "POST", "/api/workflows/"+workflowID+"/messages/apply", map[string]any{"proposalId": out.Data.AssistantMessage.Proposal.ID}, http.StatusOK)
	return err
}

// knowledgeText is the document the coverage indexes: a few chunks of
// text (knowledge.ChunkTokens words each).
var knowledgeText = strings.Repeat("The refund policy allows returns within thirty days of delivery. Shipping costs depend on the country. ", 40)

// knowledge indexes a text attachment of chat into a new knowledge base:
// the attachment uploaded to its signed URL, the document added
// (KnowledgeFunction hands its indexing job to KnowledgeIndexFunction,
// asynchronously), and, once the host has settled that invocation, the
// document ready.
func (c *client) knowledge(ctx context.Context, h Host, chat string) error {
	resp, err := c.do(ctx, "chats", "POST", "/api/chats/"+chat+"/attachments",
		map[string]any{"name": "policy.txt", "contentType": "text/plain", "size": len(knowledgeText)}, http.StatusCreated)
	if err != nil {
		return err
	}
	var att struct {
		Data struct {
			ID            string
			UploadURL     string `json:"uploadUrl"`
			UploadHeaders map[string]string
		}
	}
	if err := json.Unmarshal(resp.Body, &att); err != nil || att.Data.ID == "" || att.Data.UploadURL == "" {
		return fmt.Errorf("no attachment or upload URL in %.300s", resp.Body)
	}
	put, err := http.NewRequestWithContext(ctx, http.MethodPut, att.Data.UploadURL, strings.NewReader(knowledgeText))
	if err != nil {
		return err
	}
	for k, v := range att.Data.UploadHeaders {
		put.Header.Set(k, v)
	}
	up, err := http.DefaultClient.Do(put)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	up.Body.Close()
	if up.StatusCode != http.StatusOK {
		return fmt.Errorf("upload: %d", up.StatusCode)
	}
	kb, err := c.id(ctx, "knowledge", "POST", "/api/knowledge-bases", map[string]any{"name": "cost"}, http.StatusCreated)
	if err != nil {
		return err
	}
	doc, err := c.id(ctx, "knowledge", "POST", "/api/knowledge-bases/"+kb+"/documents", map[string]any{"attachmentId": att.Data.ID}, http.StatusAccepted)
	if err != nil {
		return err
	}
	if err := h.Settle(ctx); err != nil {
		return fmt.Errorf("indexing: %w", err)
	}
	resp, err = c.do(ctx, "knowledge", "GET", "/api/knowledge-bases/"+kb+"/documents/"+doc, nil, http.StatusOK)
	if err != nil {
		return err
	}
	var got struct{ Data struct{ Status string } }
	if err := json.Unmarshal(resp.Body, &got); err != nil || got.Data.Status != "ready" {
		return fmt.Errorf("the document is not ready once indexed: %.500s", resp.Body)
	}
	return nil
}
