// Package gobuild builds the project's Go commands for the tests that run
// them as processes of their own: the dev server, a Lambda function's
// bootstrap, a sandbox worker. It never passes the race detector on,
// whatever the test binary's flags: the race runtime's shadow memory
// counts against RLIMIT_AS, so a race-enabled worker or function would not
// measure what the deployed one does.
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// LambdaFlags are the build flags of a function's bootstrap as it is
// deployed (the Makefile's LAMBDA_FLAGS, without the symbol stripping).
var LambdaFlags = []string{"-trimpath", "-tags", "lambda.norpc"}

// Build builds package pkg (as go build takes it, relative to the working
// directory: the test's package directory) with flags to file name in dir
// and returns its path. Its error carries go build's output.
func Build(dir, name, pkg string, flags ...string) (string, error) {
	bin := filepath.Join(dir, name)
	args := append(append([]string{"build"}, flags...), "-o", bin, pkg)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// ForMain builds pkg as Build does, into a new temporary directory, for a
// TestMain (which has no testing.T): it returns the binary's path and the
// function that removes the directory. It fails when the directory cannot
// be made or the build fails.
func ForMain(name, pkg string, flags ...string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", name)
	if err != nil {
		return "", nil, err
	}
	if bin, err = Build(dir, name, pkg, flags...); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// ForTest builds pkg as Build does, into tb's temporary directory (removed
// when tb ends), and fails tb when the build fails.
func ForTest(tb testing.TB, name, pkg string, flags ...string) string {
	tb.Helper()
	bin, err := Build(tb.TempDir(), name, pkg, flags...)
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}
