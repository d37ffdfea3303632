package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Code and agent steps against the dev server binary: definitions
// validated when saved, runs through the sandbox workers and the built-in
// model.

type stepRunJSON struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Steps  []struct {
		ID     string          `json:"id"`
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Output json.RawMessage `json:"output"`
	} `json:"steps"`
}

// runSteps saves steps as the definition of a new workflow of c's user,
// runs it once and returns the finished run.
func runSteps(t *testing.T, c *client, userID, chatID, steps string) stepRunJSON {
	t.Helper()
	wf := createWorkflow(t, c, userID, "steps")
	if r := c.do("PATCH", "/api/workflows/"+wf.ID, `{"steps":`+steps+`}`); r.Status != 200 {
		t.Fatalf("PATCH steps: %d %s", r.Status, r.Body)
	}
	run := startAsync(t, c, chatID, wf.ID)
	waitRunUntil(t, c, chatID, run.ID, "finished", finished)
	r := c.do("GET", "/api/chats/"+chatID+"/workflow-runs/"+run.ID, nil)
	var out struct{ Data stepRunJSON }
	r.decode(t, &out)
	return out.Data
}

func jsStep(id, source, input string) string {
	src, _ := json.Marshal(source)
	if input == "" {
		input = "null"
	}
	return fmt.Sprintf(`{"id":%q,"toolId":"code","inputs":{"language":"javascript","source":%s,"input":%s}}`, id, src, input)
}

func TestCodeSteps(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "code-steps@example.com")
	chatID := newChat(t, c, map[string]string{"title": "code"}).ID

	t.Run("earlier outputs in scope", func(t *testing.T) {
		run := runSteps(t, c, userID, chatID, `[`+
			`{"id":"parse","toolId":"csv_parse","inputs":{"text":"name,price\na,3\nb,1"}},`+
			jsStep("total", "return input.rows.reduce((s, r) => s + Number(r.price), 0);", `{"rows":"{{parse.rows}}"}`)+`,`+
			jsStep("shape", "return {total: input.total, when: new Date(0)};", `{"total":"{{total.result}}"}`)+`]`)
		if run.Status != "completed" || string(run.Steps[1].Output) != `{"result":4}` || string(run.Steps[2].Output) != `{"result":{"total":4,"when":"1970-01-01T00:00:00.000Z"}}` {
			t.Fatalf("run %+v", run)
		}
	})

	failures := []struct{ name, source, msg string }{
		{"throw", "const a = 1;\n  throw new Error('boom');", "CODE_EXCEPTION: Error: boom at line 2, column 9"},
		{"syntax error", "return (;", "CODE_EXCEPTION: SyntaxError at line 1"},
		{"returns a function", "return () => 1;", "CODE_RESULT_INVALID: result is a function"},
		{"returns a cycle", "const o = {}; o.o = o; return o;", "CODE_RESULT_INVALID: result.o contains itself"},
		{"returns undefined", "let x = 1;", "CODE_RESULT_INVALID: the code returned undefined"},
		{"output over the limit", "return 'x'.repeat(2 << 20);", "CODE_OUTPUT_TOO_LARGE"},
		{"1 GiB allocation", "return 'x'.repeat(1 << 30).length;", "exceeded its memory limit (128 MiB)"},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			run := runSteps(t, c, userID, chatID, `[`+jsStep("js", tc.source, "")+`]`)
			if run.Status != "failed" || run.Steps[0].Status != "failed" || !strings.Contains(run.Steps[0].Error, tc.msg) {
				t.Fatalf("run %+v, want its step failed with %q", run, tc.msg)
			}
		})
	}

	// An endless loop is stopped at its CPU limit, or, on a machine too
	// loaded to give it 5 s of CPU in the tool's 15 s, at that timeout:
	// either way the step fails and the next run is served.
	t.Run("endless loop", func(t *testing.T) {
		run := runSteps(t, c, userID, chatID, `[`+jsStep("js", "while (true) {}", "")+`]`)
		if e := run.Steps[0].Error; run.Status != "failed" || !(strings.Contains(e, "CODE_CPU_LIMIT") || strings.Contains(e, "did not finish")) {
			t.Fatalf("run %+v", run)
		}
		if run := runSteps(t, c, userID, chatID, `[`+jsStep("js", "return 1;", "")+`]`); run.Status != "completed" {
			t.Fatalf("after the loop: %+v", run)
		}
	})

	t.Run("refused when saved", func(t *testing.T) {
		wf := createWorkflow(t, c, userID, "bad code")
		path := "/api/workflows/" + wf.ID
		over := strings.Repeat(" ", 100_000) + "return 1;"
		for _, tc := range []struct{ name, body, field string }{
			{"source one character over", `{"steps":[` + jsStep("js", over, "") + `]}`, "steps[0].inputs.source"},
			{"other language", `{"steps":[{"id":"js","toolId":"code","inputs":{"language":"python","source":"return 1"}}]}`, "steps[0].inputs.language"},
			{"maxTurns 0", `{"steps":[{"id":"a","toolId":"agent","inputs":{"instructions":"x","toolIds":[],"maxTurns":0}}]}`, "steps[0].inputs.maxTurns"},
			{"maxTurns 21", `{"steps":[{"id":"a","toolId":"agent","inputs":{"instructions":"x","toolIds":[],"maxTurns":21}}]}`, "steps[0].inputs.maxTurns"},
		} {
			expectFieldError(t, tc.name, c.do("PATCH", path, tc.body), tc.field)
		}
		// 1 MB of source is over the request body's bound.
		r := c.do("PATCH", path, `{"steps":[`+jsStep("js", strings.Repeat("x", 1<<20), "")+`]}`)
		if r.Status != http.StatusRequestEntityTooLarge {
			t.Errorf("1 MB source: %d %s", r.Status, r.Body)
		}
		if got := getWorkflow(t, c, wf.ID); got.Version != 1 || len(got.Steps) != 0 {
			t.Errorf("a refused PATCH wrote: %+v", got)
		}
		atLimit := strings.Repeat(" ", 100_000-len("return 1;")) + "return 1;"
		if r := c.do("PATCH", path, `{"steps":[`+jsStep("js", atLimit, "")+`]}`); r.Status != 200 {
			t.Errorf("source at the limit: %d %s", r.Status, r.Body)
		}
	})
}

func TestAgentSteps(t *testing.T) {
	t.Parallel()
	srv := durableServer(t)
	c := newClient(t, srv.API)
	userID := signUpChatUser(t, c, "agent-steps@example.com")
	chatID := newChat(t, c, map[string]string{"title": "agent"}).ID

	instructions, _ := json.Marshal(`run json_query with {"query": ".a", "input": {"a": 7}} then hash with {"text": "abc", "algorithm": "md5"}`)
	run := runSteps(t, c, userID, chatID, `[{"id":"agent","toolId":"agent","inputs":{"instructions":`+string(instructions)+`,"toolIds":["json_query","hash"]}},`+
		jsStep("count", "return input.calls.map(c => c.toolId + ':' + JSON.stringify(c.output));", `{"calls":"{{agent.toolCalls}}"}`)+`]`)
	if run.Status != "completed" {
		t.Fatalf("run %+v", run)
	}
	var out struct {
		Text      string `json:"text"`
		Turns     int    `json:"turns"`
		ToolCalls []struct {
			ToolID string         `json:"toolId"`
			Input  map[string]any `json:"input"`
			Output map[string]any `json:"output"`
			Error  string         `json:"error"`
		} `json:"toolCalls"`
	}
	if err := json.Unmarshal(run.Steps[0].Output, &out); err != nil {
		t.Fatal(err)
	}
	if out.Turns != 3 || len(out.ToolCalls) != 2 || out.ToolCalls[0].ToolID != "json_query" || out.ToolCalls[1].ToolID != "hash" ||
		out.ToolCalls[1].Output["digest"] != "900150983cd24fb0d6963f7d28e17f72" || !strings.Contains(out.Text, "The hash tool returned") {
		t.Fatalf("agent output %s", run.Steps[0].Output)
	}
	if want := `{"result":["json_query:{\"result\":7}","hash:{\"digest\":\"900150983cd24fb0d6963f7d28e17f72\"}"]}`; string(run.Steps[1].Output) != want {
		t.Errorf("a later step reads the calls: %s, want %s", run.Steps[1].Output, want)
	}

	// A tool the user's policy asks for is refused: no one is there.
	if r := c.do("PUT", "/api/users/"+userID+"/tool-permissions/json_query", map[string]string{"policy": "ask"}); r.Status != 200 {
		t.Fatalf("set policy: %d %s", r.Status, r.Body)
	}
	run = runSteps(t, c, userID, chatID, `[{"id":"agent","toolId":"agent","inputs":{"instructions":"run json_query with {\"query\": \".\"}","toolIds":["json_query"]}}]`)
	if run.Status != "completed" || !strings.Contains(string(run.Steps[0].Output), `"error":"TOOL_APPROVAL_REQUIRED: `) {
		t.Fatalf("asking tool: %+v", run)
	}

	// What a save cannot know fails the step when it runs: a model the
	// registry does not have, a tool id an earlier step gave.
	for _, tc := range []struct{ name, steps, msg string }{
		{"unknown model", `[{"id":"agent","toolId":"agent","inputs":{"instructions":"x","toolIds":[],"modelId":"no-such-model"}}]`, "INVALID_MODEL"},
		{"unknown tool", `[` + jsStep("name", "return 'no_such_tool';", "") +
			`,{"id":"agent","toolId":"agent","inputs":{"instructions":"x","toolIds":["{{name.result}}"]}}]`, "TOOL_NOT_FOUND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := runSteps(t, c, userID, chatID, tc.steps)
			last := run.Steps[len(run.Steps)-1]
			if run.Status != "failed" || !strings.HasPrefix(last.Error, tc.msg+": ") {
				t.Fatalf("run %+v, want its step failed with %s", run, tc.msg)
			}
		})
	}
	// A literal tool id an agent cannot call is refused when saved.
	wf := createWorkflow(t, c, userID, "bad agent")
	for _, tc := range []struct{ name, toolIDs, field string }{
		{"unknown tool", `["hash","no_such_tool"]`, "steps[0].inputs.toolIds[1]"},
		{"a step-only tool", `["ask_human"]`, "steps[0].inputs.toolIds[0]"},
		{"an agent", `["agent"]`, "steps[0].inputs.toolIds[0]"},
	} {
		expectFieldError(t, tc.name, c.do("PATCH", "/api/workflows/"+wf.ID, `{"steps":[{"id":"a","toolId":"agent","inputs":{"instructions":"x","toolIds":`+tc.toolIDs+`}}]}`), tc.field)
	}
}
