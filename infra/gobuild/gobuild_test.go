package gobuild_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/workflowchat/service/infra/gobuild"
)

func TestForTestBuildsARunnableCommand(t *testing.T) {
	t.Parallel()
	for _, flags := range [][]string{nil, gobuild.LambdaFlags} {
		bin := gobuild.ForTest(t, "hello", "./testdata/hello", flags...)
		out, err := exec.Command(bin, "world").Output()
		if err != nil || string(out) != "hello world\n" {
			t.Fatalf("flags %q: %q, %v", flags, out, err)
		}
	}
}

func TestForMainRemovesWhatItBuilt(t *testing.T) {
	t.Parallel()
	bin, remove, err := gobuild.ForMain("hello", "./testdata/hello")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("built binary: %v", err)
	}
	remove()
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Fatalf("after remove: %v, want not exist", err)
	}
}

func TestBuildErrorCarriesTheCompilerOutput(t *testing.T) {
	t.Parallel()
	_, _, err := gobuild.ForMain("broken", "./testdata/broken")
	if err == nil || !strings.Contains(err.Error(), "undefinedName") {
		t.Fatalf("err = %v, want go build's output naming undefinedName", err)
	}
}
