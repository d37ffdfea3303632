// Command toolworker is a tool worker on its own (tools.ServeWorker), for
// tests that need a real worker process while they run under the race
// detector: its shadow memory counts against the worker's address space
// limit, so the worker is built without it. The service's binaries serve
// the same worker mode themselves.
package main

import (
	"fmt"
	"os"

	"github.com/workflowchat/service/shared/sandbox"
	"github.com/workflowchat/service/shared/tools"
)

func main() {
	if !sandbox.IsWorker() {
		fmt.Fprintln(os.Stderr, "usage: toolworker "+sandbox.WorkerArg+" (started by a sandbox pool)")
		os.Exit(2)
	}
	tools.ServeWorker()
}
