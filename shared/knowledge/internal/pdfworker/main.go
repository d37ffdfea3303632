// Command pdfworker is the PDF worker of the knowledge package's tests:
// the test binary, built with the race detector, cannot be its own worker
// (the detector's shadow memory counts against the worker's address space
// limit), so the tests build this one without it. The service's binaries
// serve the same worker mode themselves (knowledge.ServePDFWorker).
package main

import (
	"fmt"
	"os"

	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/sandbox"
)

func main() {
	if !knowledge.IsPDFWorker() {
		fmt.Fprintln(os.Stderr, "usage: pdfworker "+sandbox.WorkerArg+" "+knowledge.PDFWorkerArg+" (started by a sandbox pool)")
		os.Exit(2)
	}
	knowledge.ServePDFWorker()
}
