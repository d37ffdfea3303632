package assembly_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

const module = "github.com/workflowchat/service/"

// builtOnce are the constructors of the services each function builds
// once, with every option, and the one folder (from the repository root)
// whose code may call each: a function or host that needs the service
// takes it from there. A second call, with other options, is how a
// function ends up with a service that lacks what another part of it
// relies on (a trigger service without a scheduler, whose deletes then
// fail).
var builtOnce = map[string]string{
	// The run service and the trigger service, which depend on each
	// other: runstart.Build, over the schedules' keeper it is given.
	module + "shared/workflow/runs.NewService": "functions/assembly/runstart",
	module + "shared/trigger.NewService":       "functions/assembly/runstart",
	// The workflow service, over the run store and trigger service
	// (runstart.Runs.Workflows), checking steps with what the function
	// gives.
	module + "shared/workflow.NewService": "functions/assembly/runstart",
	// The knowledge service (knowledgeuse.Service), over the embedder,
	// vector index and dispatcher the function gives.
	module + "shared/knowledge.NewService": "functions/assembly/knowledgeuse",
	// The chat service (chatcore.Service), with what makes replies given
	// by the function.
	module + "shared/chat.NewService": "functions/assembly/chatcore",
	// The schedules' keeper in AWS: schedules.Open, which only the
	// functions that keep schedules link.
	module + "shared/trigger/eventbridge.New": "functions/assembly/schedules",
}

// TestServicesBuiltOnce parses the code of the functions and their hosts
// (everything outside shared/, tests apart) and requires each
// constructor of builtOnce to be called exactly once, in its folder.
func TestServicesBuiltOnce(t *testing.T) {
	t.Parallel()
	calls := constructorCalls(t, os.DirFS("../.."))
	for ctor, dir := range builtOnce {
		if got := calls[ctor]; len(got) != 1 || filepath.Dir(strings.SplitN(got[0], ":", 2)[0]) != dir {
			t.Errorf("%s is called at %v, want once, in %s", ctor, got, dir)
		}
	}
}

// TestBuiltOnceCheckSeesConstructions keeps the check above honest: a
// builder that constructs a trigger service of its own, under any import
// name, is seen, and so is the one construction.
func TestBuiltOnceCheckSeesConstructions(t *testing.T) {
	t.Parallel()
	const src = `package triggersfn

import (
	"github.com/workflowchat/service/shared/store"
	trig "github.com/workflowchat/service/shared/trigger"
)

func build() *trig.Service {
	return trig.NewService(trig.Options{Store: store.NewTriggers(nil, "")})
}
`
	const runstart = `package runstart

import "github.com/workflowchat/service/shared/trigger"

var _ = trigger.NewService(trigger.Options{})
`
	calls := constructorCalls(t, fstest.MapFS{
		"functions/assembly/triggersfn/triggersfn.go":    {Data: []byte(src)},
		"functions/assembly/triggersfn/triggers_test.go": {Data: []byte(src)},
		"functions/assembly/runstart/runstart.go":        {Data: []byte(runstart)},
		"shared/trigger/trigger.go":                      {Data: []byte(runstart)},
	})
	want := []string{"functions/assembly/runstart/runstart.go:5", "functions/assembly/triggersfn/triggersfn.go:9"}
	if got := calls[module+"shared/trigger.NewService"]; !slices.Equal(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
}

// constructorCalls returns the places ("path:line") of the calls of a
// package-level function of an imported package, by the function's
// import path and name, in the .go files of fsys outside shared/ and
// tests.
func constructorCalls(t *testing.T, fsys fs.FS) map[string][]string {
	t.Helper()
	calls := map[string][]string{}
	err := fs.WalkDir(fsys, ".", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path == "shared" || path != "." && strings.HasPrefix(e.Name(), ".") || e.Name() == "testdata" {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		imports := map[string]string{}
		for _, imp := range file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = p
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] != "" {
				key := imports[x.Name] + "." + sel.Sel.Name
				calls[key] = append(calls[key], path+":"+strconv.Itoa(fset.Position(call.Pos()).Line))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return calls
}
