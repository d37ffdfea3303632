// Package knowledgecore builds the knowledge service of a process, which
// KnowledgeFunction serves (knowledgefn, with the configured embedder) and
// the sweeper resumes interrupted indexings with. It links no embedding
// client, so the sweeper does not either.
package knowledgecore

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/blobstore"
	"github.com/workflowchat/service/functions/assembly/knowledgeuse"
	"github.com/workflowchat/service/shared/awsapi"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/knowledge/s3vectorindex"
	"github.com/workflowchat/service/shared/sandbox"
)

// services holds one Service per DynamoDB client: a function (each of the
// dev server's has its own client) has one worker of indexing jobs,
// shared by its routes and the sweeper's handler.
var services sync.Map // *dynamo.DB -> *knowledge.Service

// embedded holds the embedded vector index of each local stack, keyed by
// the blob store its functions share (Deps.Blobs; the DynamoDB client
// when there is none): every function of the dev server reads and writes
// the one index, as AWS's functions share the S3 Vectors index.
var embedded sync.Map // blob.Store or *dynamo.DB -> knowledge.VectorIndex

// Service returns the process's knowledge service: the Data table's
// knowledge bases, the attachments, the blob store's segments, emb and
// the vector index (Vectors); the first call of a process builds it, the
// others return it. It fails when the blob store or the vector index
// cannot be built.
func Service(ctx context.Context, cfg config.Config, d assembly.Deps, emb knowledge.Embedder) (*knowledge.Service, error) {
	if s, ok := services.Load(d.DB); ok {
		return s.(*knowledge.Service), nil
	}
	blobs, err := blobstore.Open(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	vectors, err := stackVectors(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	s := knowledgeuse.Service(cfg, d, blobs, emb, vectors, Dispatcher(cfg), PDF(d.Logger))
	actual, _ := services.LoadOrStore(d.DB, s)
	return actual.(*knowledge.Service), nil
}

// pdf is the process's PDF reader, shared by its knowledge services (the
// dev server's functions each have one), so that the process keeps one
// pool of PDF workers.
var pdf struct {
	once sync.Once
	x    knowledge.PDFExtractor
}

// PDF returns the process's PDF reader: a knowledge.PDFSandbox of this
// binary (sandbox.SelfPath), whose workers start at the first PDF read. A
// PDF is never read in the indexing process: a hostile one could abort it
// (a stack overflow, an allocation of gigabytes) or hold it past its
// deadline. Every main that links this package therefore serves a PDF
// worker first thing when knowledge.IsPDFWorker reports true. Its pool
// holds at most knowledge.PDFWorkers of knowledge.PDFWorkerPeak, which
// KnowledgeIndexFunction's memory, reading one document at a time, holds
// with room to spare. logger (of the first call) hears of every worker
// stopped.
func PDF(logger *slog.Logger) knowledge.PDFExtractor {
	pdf.once.Do(func() {
		self, err := sandbox.SelfPath()
		if err != nil {
			pdf.x = noPDF{err}
			return
		}
		pdf.x = knowledge.NewPDFSandbox(knowledge.PDFSandboxOptions{Path: self, Logger: logger})
	})
	return pdf.x
}

// noPDF refuses to read PDFs: this binary's path is not known, so no
// worker can start.
type noPDF struct{ err error }

func (n noPDF) PDFText(context.Context, string, []byte) (string, error) {
	return "", errs.E("knowledgecore.PDFText", errs.Unavailable, knowledge.CodePDFUnavailable, "PDF text extraction is unavailable").WithCause(n.err)
}

// Dispatcher returns what hands indexing jobs to their worker: the
// LambdaDispatcher of KNOWLEDGE_INDEX_FUNCTION when it is set (AWS: the
// routes and the sweeper hand jobs to KnowledgeIndexFunction), else nil,
// the service's own worker in process (the dev server).
func Dispatcher(cfg config.Config) knowledge.Dispatcher {
	if cfg.KnowledgeIndexFunction == "" {
		return nil
	}
	return LambdaDispatcher{Client: assembly.AWSAPI(cfg), Function: cfg.KnowledgeIndexFunction}
}

// LambdaDispatcher hands indexing jobs to the indexing function through
// the Lambda Invoke API, asynchronously (InvocationType Event): Lambda
// queues the job's reference and answers 202 at once. A job whose event
// is lost (refused, dropped, or its function killed) keeps its lease
// only until the lease ends; the sweeper then claims it as a new attempt
// and dispatches it again (knowledge.Service.Resume).
type LambdaDispatcher struct {
	Client   *awsapi.Client
	Function string
}

// Dispatch queues ref for the indexing function. It fails when Lambda
// does not accept the event or cannot be reached.
func (l LambdaDispatcher) Dispatch(ctx context.Context, ref knowledge.Ref) error {
	payload, err := json.Marshal(ref)
	if err != nil {
		return err
	}
	return l.Client.Invoke(ctx, l.Function, payload)
}

// Vectors returns the vector index: S3 Vectors when
// KNOWLEDGE_VECTOR_BUCKET is set (AWS), else the embedded one beside
// DATA_FILE (DATA_FILE.vectors; memory without DATA_FILE).
func Vectors(ctx context.Context, cfg config.Config) (knowledge.VectorIndex, error) {
	if cfg.KnowledgeVectorBucket != "" {
		return s3vectorindex.New(ctx, s3vectorindex.Options{Bucket: cfg.KnowledgeVectorBucket, Index: cfg.KnowledgeVectorIndex, Region: cfg.Region})
	}
	dir := ""
	if cfg.DataFile != "" {
		dir = cfg.DataFile + ".vectors"
	}
	return knowledge.NewEmbedded(dir, knowledge.Dimensions)
}

// stackVectors is Vectors, the embedded index shared by the functions of
// d's stack (embedded).
func stackVectors(ctx context.Context, cfg config.Config, d assembly.Deps) (knowledge.VectorIndex, error) {
	if cfg.KnowledgeVectorBucket != "" {
		return Vectors(ctx, cfg)
	}
	var key any = d.DB
	if d.Blobs != nil {
		key = d.Blobs
	}
	if v, ok := embedded.Load(key); ok {
		return v.(knowledge.VectorIndex), nil
	}
	v, err := Vectors(ctx, cfg)
	if err != nil {
		return nil, err
	}
	actual, _ := embedded.LoadOrStore(key, v)
	return actual.(knowledge.VectorIndex), nil
}

// SweeperEmbedder is the embedder of a service the sweeper builds: the
// built-in one when it is the configured one; else one that refuses
// (Unavailable), so that an indexing the sweeper resumes fails with a
// reason instead of mixing another embedder's vectors into a knowledge
// base (the sweeper links no embedding client).
func SweeperEmbedder(cfg config.Config) knowledge.Embedder {
	if cfg.KnowledgeEmbedder == "" || cfg.KnowledgeEmbedder == "builtin" {
		return knowledge.Lexical{}
	}
	return refusing{}
}

type refusing struct{}

func (refusing) Name() string    { return "sweeper" }
func (refusing) Dimensions() int { return knowledge.Dimensions }
func (refusing) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errs.E("knowledgecore.Embed", errs.Unavailable, "EMBEDDING_UNAVAILABLE",
		"indexing was interrupted and could not be resumed with the configured embedder; add the document again")
}
