package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// lambdaRuntimeSection runs infra/lambdart's TestReport, which builds every
// function, measures its deployed size and zip, and times its first
// invocation under the AWS Lambda Runtime Interface Emulator, and includes
// its table.
func lambdaRuntimeSection(doc *bytes.Buffer, o options) error {
	dir, err := os.MkdirTemp("", "bench-lambdart")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	table := filepath.Join(dir, "report.md")
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestReport$", "./infra/lambdart/")
	cmd.Env = append(os.Environ(), "LAMBDART_REPORT=1", "LAMBDART_REPORT_OUT="+table, "LAMBDART_ROUNDS="+strconv.Itoa(o.rounds))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	runErr := cmd.Run()
	fmt.Fprintf(doc, "`LAMBDART_REPORT=1 LAMBDART_ROUNDS=%d go test -run TestReport -v ./infra/lambdart/`. "+
		"Size: the linux/arm64 bootstrap built with the production flags, and its deployment zip (deflate). "+
		"First invoke: each function's bootstrap, built for this machine, under the AWS Lambda Runtime Interface Emulator, started fresh for "+
		"one event: the emulator starts the bootstrap for it, so this holds the process start, package init, main's setup and one request "+
		"(a route the function does not serve, the tool server's refusal without its key, a run that does not exist for the runner, "+
		"a sweep over empty tables for the sweeper). Wall: from the emulator listening to the answer. CPU: the CPU time of the bootstrap "+
		"(and any process it started) and of the emulator during the call, what the invocation costs on an idle machine; unlike the wall "+
		"time it does not grow with the machine's other work, so the ratio to health is taken of it: the median, over %d rounds (each starting every function once in random order), "+
		"of the function's CPU time over health's in the same round; the CPU column is the least over the rounds. "+
		"`TestColdStartInitWithinBudget` (part of `make test`) logs these ratios without holding them (they move with the machine's load) "+
		"and holds each function's package init, as `GODEBUG=inittrace=1` counts it (bytes, allocations, packages), to a budget.\n\n", o.rounds, o.rounds)
	b, err := os.ReadFile(table)
	if err != nil {
		return errors.Join(runErr, fmt.Errorf("the report's table: %w", err))
	}
	doc.Write(b)
	if runErr != nil {
		fmt.Fprintf(doc, "\n**The report failed: %v.**\n", runErr)
	}
	return runErr
}
