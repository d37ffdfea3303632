package knowledge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/sandbox"
)

// PDFExtractor reads the text of a PDF for userID (whose documents share
// its fair part of the extraction's resources). An error of the file's
// own (damaged, encrypted, no text, over a bound) is a message for its
// user; a context error, or an *errs.Error, is returned as it is.
type PDFExtractor interface {
	PDFText(ctx context.Context, userID string, data []byte) (string, error)
}

// inProcess reads PDFs in this process: tests, and a service built
// without Options.PDF.
type inProcess struct{}

func (inProcess) PDFText(ctx context.Context, _ string, data []byte) (string, error) {
	return pdfText(ctx, data)
}

// The PDF sandbox. The in-process guards of pdfText make the common
// hostile files cheap, but the parser underneath can still be driven to
// recurse until the Go runtime aborts (a fatal error no recover catches),
// to allocate gigabytes from a size a file claims, or to loop where no
// deadline is checked. PDFSandbox therefore runs pdfText in a sandbox
// worker process, which the kernel bounds in memory and CPU time and the
// pool kills at its deadline: such a file fails its document, never the
// indexing process. A worker holds at most PDFWorkerPeak; a host keeps
// PDFWorkers of them (at most PDFPerUser for one user's documents).
const (
	// PDFWorkerArg follows sandbox.WorkerArg on the command line of a PDF
	// worker, so that a binary serves the PDF workers and others.
	PDFWorkerArg = "pdf"
	// PDFWorkers is the pool's size: the least a pool may have with one
	// user's documents read one at a time.
	PDFWorkers = 2
	// PDFPerUser is how many of one user's PDFs are read at once.
	PDFPerUser = 1
	// PDFWorkerMemory is how much a worker's heap may grow after its
	// start: four of the Go runtime's 64 MiB heap arenas. A 25 MiB PDF
	// (the largest attachment) whose text reaches MaxTextBytes needs
	// about 130 MiB.
	PDFWorkerMemory = 256 << 20
	// PDFWorkerPeak is the most memory one worker may hold: its size at
	// start (about 13 MiB resident, counted as 16), PDFWorkerMemory and
	// the runtime's own mappings, 296 MiB in all. An indexing process
	// (KnowledgeIndexFunction, 1024 MB) reads one document at a time: one
	// busy worker at its peak and one idle beside it (an idle worker
	// whose peak passed half of PDFWorkerMemory is retired) leave it over
	// 500 MiB.
	PDFWorkerPeak = 16<<20 + PDFWorkerMemory + sandbox.RuntimeOverhead
	// pdfCPUBudget is the CPU time after which a worker is replaced.
	pdfCPUBudget = time.Minute
	// pdfCPULimit is the CPU time at which the kernel kills a worker: past
	// pdfCPUBudget by more than MaxPDFTime, so that only a worker whose
	// pool failed to stop it at its deadline reaches it.
	pdfCPULimit = pdfCPUBudget + MaxPDFTime + 30*time.Second
	// pdfMaxResponse is a worker's largest answer: the text and its tag.
	pdfMaxResponse = MaxTextBytes + 1
)

// A worker's answer: a tag byte, then the text or the error's message.
const (
	pdfAnswerText  = 'T'
	pdfAnswerError = 'E'
)

// msgPDFLimits is the message of a PDF whose worker was stopped.
const msgPDFLimits = "the PDF could not be read within its limits"

// CodePDFUnavailable: the PDF sandbox could not run the extraction (no
// worker could start); the document is not at fault.
const CodePDFUnavailable = "PDF_UNAVAILABLE"

// IsPDFWorker reports whether this process was started as a PDF worker
// (sandbox.WorkerArg, then PDFWorkerArg). A main whose process extracts
// PDFs calls ServePDFWorker first thing when it does.
func IsPDFWorker() bool {
	return sandbox.IsWorker() && len(os.Args) > 2 && os.Args[2] == PDFWorkerArg
}

// ServePDFWorker runs this process as a worker of a PDFSandbox and never
// returns.
func ServePDFWorker() {
	sandbox.ServeWorker(PDFWorker())
}

// PDFWorker is a PDF worker's handler: the request is a PDF's bytes, the
// answer its text (pdfText, with its guards) or the message of why it
// could not be read.
func PDFWorker() sandbox.Handler {
	return func(ctx context.Context, request []byte) (answer []byte) {
		defer func() {
			if p := recover(); p != nil {
				answer = append([]byte{pdfAnswerError}, errPDFDamaged.Error()...)
			}
		}()
		text, err := pdfText(ctx, request)
		if err != nil {
			return append([]byte{pdfAnswerError}, err.Error()...)
		}
		out := make([]byte, 1+len(text))
		out[0] = pdfAnswerText
		copy(out[1:], text)
		return out
	}
}

// PDFSandboxOptions configure a PDFSandbox.
type PDFSandboxOptions struct {
	// Path is the worker program, normally sandbox.SelfPath(): a binary
	// whose main calls ServePDFWorker when IsPDFWorker.
	Path string
	// Timeout bounds the reading of one PDF, from its worker's start on
	// it; zero means MaxPDFTime.
	Timeout time.Duration
	// Logger hears of every worker stopped; nil means slog.Default().
	Logger *slog.Logger
}

// PDFSandbox reads PDFs in sandbox workers (see PDFWorkerMemory). Its pool
// starts at its first PDF, so that a process that reads none spends
// nothing on workers. It is safe for concurrent use.
type PDFSandbox struct {
	o    PDFSandboxOptions
	pool func() (*sandbox.Pool, error)
	mu   sync.Mutex
	p    *sandbox.Pool
	shut bool
}

var _ PDFExtractor = (*PDFSandbox)(nil)

// NewPDFSandbox returns a PDFSandbox over o.
func NewPDFSandbox(o PDFSandboxOptions) *PDFSandbox {
	if o.Timeout <= 0 {
		o.Timeout = MaxPDFTime
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &PDFSandbox{o: o}
	s.pool = sync.OnceValues(func() (*sandbox.Pool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.shut {
			return nil, sandbox.ErrClosed
		}
		p, err := sandbox.New(sandbox.Options{
			Path:        o.Path,
			Args:        []string{PDFWorkerArg},
			Workers:     PDFWorkers,
			PerKey:      PDFPerUser,
			Memory:      PDFWorkerMemory,
			CPUBudget:   pdfCPUBudget,
			CPULimit:    pdfCPULimit,
			Timeout:     o.Timeout,
			MaxResponse: pdfMaxResponse,
			Logger:      o.Logger,
		})
		s.p = p
		return p, err
	})
	return s
}

// PDFText reads data's text in a worker, under userID's share of the
// pool. A worker stopped for its memory, its time or a crash is an error
// for the user (msgPDFLimits); ctx's end is ctx's error; a pool that
// cannot run it is Unavailable CodePDFUnavailable.
func (s *PDFSandbox) PDFText(ctx context.Context, userID string, data []byte) (string, error) {
	const op = "knowledge.PDFText"
	p, err := s.pool()
	if err != nil {
		return "", errs.E(op, errs.Unavailable, CodePDFUnavailable, "PDF text extraction is unavailable; add the document again later").WithCause(err)
	}
	answer, err := p.Do(ctx, userID, data)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("%s: %w", op, ctx.Err())
		}
		var le *sandbox.LimitError
		var ce *sandbox.CrashError
		switch {
		case errors.As(err, &le):
			s.o.Logger.WarnContext(ctx, "knowledge: a PDF passed its worker's limits", "userId", userID, "bytes", len(data), "err", err.Error())
			switch le.Resource {
			case sandbox.Memory:
				return "", fmt.Errorf("%s: it needs more than %d MiB of memory", msgPDFLimits, PDFWorkerMemory>>20)
			case sandbox.Time, sandbox.CPU:
				return "", fmt.Errorf("%s: reading it takes more than %s", msgPDFLimits, s.o.Timeout)
			}
			return "", errors.New(msgPDFLimits)
		case errors.As(err, &ce):
			s.o.Logger.WarnContext(ctx, "knowledge: a PDF's worker crashed", "userId", userID, "bytes", len(data), "err", err.Error())
			return "", errors.New(msgPDFLimits)
		}
		return "", errs.E(op, errs.Unavailable, CodePDFUnavailable, "PDF text extraction is unavailable; add the document again later").WithCause(err)
	}
	if len(answer) == 0 {
		return "", errors.New(msgPDFLimits)
	}
	switch answer[0] {
	case pdfAnswerText:
		return string(answer[1:]), nil
	case pdfAnswerError:
		return "", errors.New(string(answer[1:]))
	}
	return "", errors.New(msgPDFLimits)
}

// Close stops the pool's workers, if it started; later PDFs fail
// Unavailable.
func (s *PDFSandbox) Close() error {
	s.mu.Lock()
	s.shut = true
	p := s.p
	s.mu.Unlock()
	if p != nil {
		return p.Close()
	}
	return nil
}
