package knowledge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/paging"
)

// Store keeps knowledge bases, documents and the indexing jobs' leases.
// Every multi-item write is one transaction.
type Store interface {
	// CreateKnowledgeBase stores kb, conditioned on its user having fewer
	// than limit: Conflict KNOWLEDGE_BASE_LIMIT otherwise.
	CreateKnowledgeBase(ctx context.Context, kb KnowledgeBase, limit int) error
	// KnowledgeBase returns userID's knowledge base id: NotFound
	// KNOWLEDGE_BASE_NOT_FOUND when there is none (another user's too).
	KnowledgeBase(ctx context.Context, userID, id string) (KnowledgeBase, error)
	// ListKnowledgeBases returns a page of userID's knowledge bases, oldest
	// first, and the cursor of the next page ("" at the end).
	ListKnowledgeBases(ctx context.Context, userID string, page paging.Cursor) ([]KnowledgeBase, string, error)
	// UpdateKnowledgeBase writes kb's name and description, conditioned on
	// its version (Conflict when it changed).
	UpdateKnowledgeBase(ctx context.Context, kb KnowledgeBase) error
	// DeleteKnowledgeBase deletes kb and stores p, the purge of its
	// documents' vectors and segments, in one transaction; its collection
	// (documents, jobs) stays, unreachable (every route reads the
	// knowledge base first), as the purge's list until ListPurge or
	// FinishPurge.
	DeleteKnowledgeBase(ctx context.Context, kb KnowledgeBase, p Purge) error
	// CreateDocument stores d (status indexing) and starts its indexing
	// job with a lease until lease, conditioned on the knowledge base
	// holding fewer than MaxDocuments: Conflict DOCUMENT_LIMIT otherwise,
	// NotFound when it is gone.
	CreateDocument(ctx context.Context, d Document, lease time.Time) error
	// Document returns a document of knowledge base kbID: NotFound
	// DOCUMENT_NOT_FOUND.
	Document(ctx context.Context, kbID, id string) (Document, error)
	// ListDocuments returns a page of kbID's documents, oldest first.
	ListDocuments(ctx context.Context, kbID string, page paging.Cursor) ([]Document, string, error)
	// Documents returns all of kbID's documents (at most MaxDocuments).
	Documents(ctx context.Context, kbID string) ([]Document, error)
	// RenewIndexing extends ref's lease to until, conditioned on the job
	// being active at ref.Attempt: Conflict NOT_ACTIVE otherwise.
	RenewIndexing(ctx context.Context, ref Ref, until time.Time) error
	// ClaimIndexing takes an expired indexing job over: the document's
	// attempt goes up by one and the lease to until, conditioned on the
	// lease having ended before expiredBefore. It returns the document
	// as claimed; NotFound when the document is gone (the job's head is
	// then ended), Conflict when another process renewed or claimed it.
	ClaimIndexing(ctx context.Context, kbID, docID string, expiredBefore, until time.Time) (Document, error)
	// FinishDocument ends ref's job with d's status (ready with
	// d.ChunkCount added to the knowledge base's, or failed with
	// d.Error), conditioned on the job being at ref.Attempt: Conflict
	// NOT_ACTIVE otherwise, NotFound when the document is gone, Conflict
	// CHUNK_LIMIT when the chunks would pass MaxChunks.
	FinishDocument(ctx context.Context, ref Ref, d Document) error
	// DeleteDocument deletes d, takes its counts off its knowledge base
	// and stores p, the purge of its vectors and segment, in one
	// transaction; its job, if still active, is ended.
	DeleteDocument(ctx context.Context, d Document, p Purge) error
	// Purges returns up to limit purges due at now, the oldest due first.
	Purges(ctx context.Context, now time.Time, limit int) ([]Purge, error)
	// DeferPurge makes p due at at; deferring a finished one succeeds.
	DeferPurge(ctx context.Context, p Purge, at time.Time) error
	// ListPurge records on knowledge base purge p that its collection
	// was read, with p.Pending, makes it due at at, then deletes the
	// collection; a finished purge is left as it is.
	ListPurge(ctx context.Context, p Purge, at time.Time) error
	// FinishPurge removes p and, for a knowledge base's, what is left of
	// its collection.
	FinishPurge(ctx context.Context, p Purge) error
}

// Files reads the user's attachments (the attachment service).
type Files interface {
	ReadyByID(ctx context.Context, userID, id string) (attachment.Attachment, error)
	Read(ctx context.Context, a attachment.Attachment, max int64) ([]byte, error)
}

// Dispatcher hands an indexing job to its worker: in process locally, an
// asynchronous invocation in AWS. It fails when the job could not be
// handed over (the sweeper then starts it again when its lease ends).
type Dispatcher interface {
	Dispatch(ctx context.Context, ref Ref) error
}

// CodeChunkLimit: the knowledge base would hold more than MaxChunks.
const CodeChunkLimit = "CHUNK_LIMIT"

// PrefixSegments is the blob prefix of documents' segments (their
// chunks as JSON): knowledge/<kbId>/<docId>.json.
const PrefixSegments = blob.PrefixKnowledge

func segmentKey(kbID, docID string) string { return PrefixSegments + kbID + "/" + docID + ".json" }

// Options configure a Service.
type Options struct {
	Store    Store
	Files    Files
	Blobs    blob.Backend
	Embedder Embedder
	Vectors  VectorIndex
	// Dispatch hands indexing jobs to their worker; nil runs them in
	// process (InProcess).
	Dispatch Dispatcher
	// Lease is how long an indexing job's lease lasts between renewals;
	// zero means 30 s.
	Lease time.Duration
	// MaxKnowledgeBases is the per-user cap; zero means
	// MaxKnowledgeBasesPerUser.
	MaxKnowledgeBases int
	// PDF reads the text of PDFs (a PDFSandbox: worker processes bounded
	// in memory and time); nil reads them in this process, as tests do.
	PDF PDFExtractor
	// IndexTimeout bounds one indexing attempt; zero means 10 minutes.
	IndexTimeout time.Duration
	Now          func() time.Time
	Logger       *slog.Logger
}

// Service is the knowledge base domain.
type Service struct {
	o        Options
	segments *segmentCache
}

// NewService returns a Service over o.
func NewService(o Options) *Service {
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.MaxKnowledgeBases <= 0 {
		o.MaxKnowledgeBases = MaxKnowledgeBasesPerUser
	}
	if o.IndexTimeout <= 0 {
		o.IndexTimeout = 10 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Embedder == nil {
		o.Embedder = Lexical{}
	}
	if o.PDF == nil {
		o.PDF = inProcess{}
	}
	s := &Service{o: o, segments: newSegmentCache(maxCachedChunks)}
	if s.o.Dispatch == nil {
		s.o.Dispatch = NewInProcess(s, 2)
	}
	return s
}

func (s *Service) now() time.Time { return s.o.Now().UTC() }

// CreateRequest is the body of POST /api/knowledge-bases.
type CreateRequest struct {
	Name        string  `json:"name"`
	Description *string `json:"description"`
}

// Validate checks the name (1-200 characters, one line: no control
// characters) and description (at most 2,000).
func (r CreateRequest) Validate() error {
	var bad errs.FieldErrors
	if n := utf8.RuneCountInString(strings.TrimSpace(r.Name)); n == 0 || n > MaxNameChars {
		bad.Add("name", "must be 1 to %d characters", MaxNameChars)
	} else {
		bad.OneLine("name", r.Name)
	}
	if r.Description != nil && utf8.RuneCountInString(*r.Description) > MaxDescriptionChars {
		bad.Add("description", "must be at most %d characters", MaxDescriptionChars)
	}
	if len(bad) > 0 {
		return errs.Fields("knowledge.Create", bad...)
	}
	return nil
}

// UpdateRequest is the body of PATCH .../:knowledgeBaseId.
type UpdateRequest struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
}

// Validate checks the fields given as CreateRequest does.
func (r UpdateRequest) Validate() error {
	var bad errs.FieldErrors
	if r.Name != nil {
		if n := utf8.RuneCountInString(strings.TrimSpace(*r.Name)); n == 0 || n > MaxNameChars {
			bad.Add("name", "must be 1 to %d characters", MaxNameChars)
		} else {
			bad.OneLine("name", *r.Name)
		}
	}
	if r.Description != nil && utf8.RuneCountInString(*r.Description) > MaxDescriptionChars {
		bad.Add("description", "must be at most %d characters", MaxDescriptionChars)
	}
	if len(bad) > 0 {
		return errs.Fields("knowledge.Update", bad...)
	}
	return nil
}

// Create makes a knowledge base for userID: Conflict
// KNOWLEDGE_BASE_LIMIT when the user has the most allowed.
func (s *Service) Create(ctx context.Context, userID string, in CreateRequest) (KnowledgeBase, error) {
	now := s.now()
	kb := KnowledgeBase{ID: newID(), UserID: userID, Name: strings.TrimSpace(in.Name), CreatedAt: now, UpdatedAt: now, Version: 1}
	if in.Description != nil {
		kb.Description = *in.Description
	}
	if err := s.o.Store.CreateKnowledgeBase(ctx, kb, s.o.MaxKnowledgeBases); err != nil {
		return KnowledgeBase{}, errs.Wrap("knowledge.Create", err)
	}
	return kb, nil
}

// newID returns a time-ordered UUID (version 7), so that lists sorted by
// id are sorted by creation.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// Get returns userID's knowledge base id (NotFound for another user's).
func (s *Service) Get(ctx context.Context, userID, id string) (KnowledgeBase, error) {
	kb, err := s.o.Store.KnowledgeBase(ctx, userID, id)
	return kb, errs.Wrap("knowledge.Get", err)
}

// List returns a page of userID's knowledge bases.
func (s *Service) List(ctx context.Context, userID string, page paging.Cursor) ([]KnowledgeBase, string, error) {
	kbs, next, err := s.o.Store.ListKnowledgeBases(ctx, userID, page)
	return kbs, next, errs.Wrap("knowledge.List", err)
}

// Update changes a knowledge base's name or description.
func (s *Service) Update(ctx context.Context, userID, id string, in UpdateRequest) (KnowledgeBase, error) {
	const op = "knowledge.Update"
	kb, err := s.o.Store.KnowledgeBase(ctx, userID, id)
	if err != nil {
		return KnowledgeBase{}, errs.Wrap(op, err)
	}
	if in.Name != nil {
		kb.Name = strings.TrimSpace(*in.Name)
	}
	if in.Description != nil {
		kb.Description = *in.Description
	}
	kb.UpdatedAt = s.now()
	if err := s.o.Store.UpdateKnowledgeBase(ctx, kb); err != nil {
		return KnowledgeBase{}, errs.Wrap(op, err)
	}
	kb.Version++
	return kb, nil
}

// Delete deletes a knowledge base with its documents, their vectors and
// segments: the knowledge base and the purge of the rest go in one
// transaction, the purge's first pass runs at once (a Purge: the
// sweeper finishes what a crash or an unreachable index left).
func (s *Service) Delete(ctx context.Context, userID, id string) error {
	const op = "knowledge.Delete"
	kb, err := s.o.Store.KnowledgeBase(ctx, userID, id)
	if err != nil {
		return errs.Wrap(op, err)
	}
	p := s.newPurge(id, "", 0, true)
	if err := s.o.Store.DeleteKnowledgeBase(ctx, kb, p); err != nil {
		return errs.Wrap(op, err)
	}
	s.purgeNow(ctx, p)
	return nil
}

// dropIndexes deletes d's vectors and segment, logging failures (what
// remains is unreachable: no document names it).
func (s *Service) dropIndexes(ctx context.Context, d Document) {
	n := MaxChunks
	if d.ChunkCount != nil {
		n = *d.ChunkCount
	}
	if err := s.o.Vectors.DeleteDocument(ctx, d.KnowledgeBaseID, d.ID, n); err != nil {
		s.o.Logger.WarnContext(ctx, "knowledge: delete vectors", "documentId", d.ID, "err", err.Error())
	}
	if err := s.o.Blobs.Delete(ctx, segmentKey(d.KnowledgeBaseID, d.ID)); err != nil && !errs.Is(err, errs.NotFound) {
		s.o.Logger.WarnContext(ctx, "knowledge: delete segment", "documentId", d.ID, "err", err.Error())
	}
	s.segments.drop(d.ID)
}

// AddRequest is the body of POST .../documents.
type AddRequest struct {
	AttachmentID string `json:"attachmentId"`
}

// Validate requires a UUID attachmentId.
func (r AddRequest) Validate() error {
	if _, err := uuid.Parse(r.AttachmentID); err != nil || len(r.AttachmentID) != 36 {
		return errs.Fields("knowledge.AddDocument", errs.FieldError{Field: "attachmentId", Message: "must be the id of a ready attachment"})
	}
	return nil
}

// AddDocument indexes userID's ready attachment into knowledge base
// kbID: the document is stored as indexing and its job handed to the
// worker. Errors: NotFound KNOWLEDGE_BASE_NOT_FOUND, the attachment's
// (NotFound ATTACHMENT_NOT_FOUND for another user's, Conflict
// ATTACHMENT_NOT_READY or ATTACHMENT_FAILED), 415 UNSUPPORTED_MEDIA_TYPE
// for a type that cannot be indexed, Conflict DOCUMENT_LIMIT.
func (s *Service) AddDocument(ctx context.Context, userID, kbID string, in AddRequest) (Document, error) {
	const op = "knowledge.AddDocument"
	kb, err := s.o.Store.KnowledgeBase(ctx, userID, kbID)
	if err != nil {
		return Document{}, errs.Wrap(op, err)
	}
	if kb.DocumentCount >= MaxDocuments {
		return Document{}, errs.E(op, errs.Conflict, CodeDocumentLimit, fmt.Sprintf("the knowledge base holds %d documents, the most allowed", MaxDocuments))
	}
	a, err := s.o.Files.ReadyByID(ctx, userID, in.AttachmentID)
	if err != nil {
		return Document{}, errs.Wrap(op, err)
	}
	if !Indexable(a.ContentType) {
		return Document{}, errs.E(op, errs.UnsupportedMediaType, CodeUnsupportedDocument,
			fmt.Sprintf("attachment %s is %s: text, Markdown, CSV, JSON and PDF files can be indexed", a.ID, a.ContentType))
	}
	now := s.now()
	d := Document{ID: newID(), KnowledgeBaseID: kbID, UserID: userID, AttachmentID: a.ID, Name: a.Name, ContentType: a.ContentType,
		Size: a.Size, Status: StatusIndexing, CreatedAt: now, UpdatedAt: now, Attempt: 1}
	if err := s.o.Store.CreateDocument(ctx, d, now.Add(s.o.Lease)); err != nil {
		return Document{}, errs.Wrap(op, err)
	}
	ref := Ref{KnowledgeBaseID: kbID, DocumentID: d.ID, Attempt: 1}
	if err := s.o.Dispatch.Dispatch(ctx, ref); err != nil {
		// The job is stored: the sweeper starts it when its lease ends.
		s.o.Logger.WarnContext(ctx, "knowledge: dispatch", "documentId", d.ID, "err", err.Error())
	}
	return d, nil
}

// Document returns a document of userID's knowledge base kbID.
func (s *Service) Document(ctx context.Context, userID, kbID, id string) (Document, error) {
	const op = "knowledge.Document"
	if _, err := s.o.Store.KnowledgeBase(ctx, userID, kbID); err != nil {
		return Document{}, errs.Wrap(op, err)
	}
	d, err := s.o.Store.Document(ctx, kbID, id)
	return d, errs.Wrap(op, err)
}

// Documents returns a page of userID's knowledge base kbID's documents.
func (s *Service) Documents(ctx context.Context, userID, kbID string, page paging.Cursor) ([]Document, string, error) {
	const op = "knowledge.Documents"
	if _, err := s.o.Store.KnowledgeBase(ctx, userID, kbID); err != nil {
		return nil, "", errs.Wrap(op, err)
	}
	docs, next, err := s.o.Store.ListDocuments(ctx, kbID, page)
	return docs, next, errs.Wrap(op, err)
}

// DeleteDocument deletes a document with its vectors and segment (a
// Purge, as Delete's).
func (s *Service) DeleteDocument(ctx context.Context, userID, kbID, id string) error {
	const op = "knowledge.DeleteDocument"
	d, err := s.Document(ctx, userID, kbID, id)
	if err != nil {
		return errs.Wrap(op, err)
	}
	n := 0
	if d.Status == StatusReady && d.ChunkCount != nil {
		n = *d.ChunkCount
	}
	p := s.newPurge(kbID, id, n, d.Status == StatusIndexing)
	if err := s.o.Store.DeleteDocument(ctx, d, p); err != nil {
		return errs.Wrap(op, err)
	}
	s.purgeNow(ctx, p)
	return nil
}

// Index runs one attempt of ref's indexing: it reads the attachment,
// extracts its text, chunks, embeds and stores the vectors and the
// segment, then records the document ready (or failed with why), renewing
// the job's lease meanwhile. A ref whose attempt is not the document's
// current one, or whose document is no longer indexing, is a no-op. It
// fails only when the outcome could not be recorded (the sweeper then
// takes the job over when its lease ends).
func (s *Service) Index(ctx context.Context, ref Ref) error {
	const op = "knowledge.Index"
	d, err := s.o.Store.Document(ctx, ref.KnowledgeBaseID, ref.DocumentID)
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil {
		return errs.Wrap(op, err)
	}
	if d.Status != StatusIndexing || d.Attempt != ref.Attempt {
		return nil
	}
	if _, err := s.o.Store.KnowledgeBase(ctx, d.UserID, d.KnowledgeBaseID); errs.Is(err, errs.NotFound) {
		// Deleted: its purge removes the document; end the job.
		d.Status, d.Error, d.UpdatedAt = StatusFailed, "the knowledge base was deleted", s.now()
		if err := s.o.Store.FinishDocument(ctx, ref, d); err != nil && !errs.Is(err, errs.NotFound) && !errs.Is(err, errs.Conflict) {
			return errs.Wrap(op, err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.IndexTimeout)
	defer cancel()
	work, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.renew(work, stop, ref)
	}()
	n, ierr := s.index(work, d)
	stop(nil)
	wg.Wait()
	if ctx.Err() != nil && ierr != nil && errors.Is(ierr, context.DeadlineExceeded) {
		ierr = errs.E(op, errs.Timeout, "", fmt.Sprintf("indexing took more than %s", s.o.IndexTimeout))
	}
	if cause := context.Cause(work); ierr != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		// The lease was lost (the document was deleted, or another
		// attempt took over): that attempt records the outcome. A
		// deleted document's purge may have run its passes before this
		// attempt's writes: they are deleted here.
		s.o.Logger.InfoContext(ctx, "knowledge: indexing lost its lease", "documentId", d.ID, "err", cause.Error())
		if _, err := s.o.Store.Document(context.WithoutCancel(ctx), d.KnowledgeBaseID, d.ID); errs.Is(err, errs.NotFound) {
			s.dropIndexes(context.WithoutCancel(ctx), d)
		}
		return nil
	}
	// A failure's writes are deleted before it is recorded: once the
	// document is no longer indexing, a purge of its knowledge base does
	// not wait for it (a crash between would leave them behind).
	d.UpdatedAt = s.now()
	if ierr != nil {
		d.Status, d.Error = StatusFailed, message(ierr)
		s.dropIndexes(context.WithoutCancel(ctx), d)
	} else {
		d.Status, d.ChunkCount = StatusReady, &n
	}
	err = s.o.Store.FinishDocument(context.WithoutCancel(ctx), ref, d)
	if errs.CodeOf(err) == CodeChunkLimit {
		d.Status, d.ChunkCount, d.Error = StatusFailed, nil, fmt.Sprintf("the document's %d chunks would take the knowledge base past %d", n, MaxChunks)
		s.dropIndexes(context.WithoutCancel(ctx), d)
		err = s.o.Store.FinishDocument(context.WithoutCancel(ctx), ref, d)
	}
	if d.Status == StatusReady && err != nil {
		s.dropIndexes(context.WithoutCancel(ctx), d)
	}
	if errs.Is(err, errs.NotFound) || errs.Is(err, errs.Conflict) {
		return nil
	}
	return errs.Wrap(op, err)
}

// message is what a failed document's error says: the client-safe
// message of a domain error, a generic one otherwise.
func message(err error) string {
	var e *errs.Error
	if errors.As(err, &e) && e.Message != "" && e.Kind != errs.Internal {
		return e.Message
	}
	return "the document could not be indexed"
}

// renew renews ref's lease every third of it until ctx ends; a renewal
// refused (the job is no longer this attempt's) stops the work with that
// cause.
func (s *Service) renew(ctx context.Context, stop context.CancelCauseFunc, ref Ref) {
	t := time.NewTicker(s.o.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.o.Store.RenewIndexing(ctx, ref, s.now().Add(s.o.Lease))
		if errs.Is(err, errs.Conflict) || errs.Is(err, errs.NotFound) {
			stop(err)
			return
		}
		if err != nil && ctx.Err() == nil {
			s.o.Logger.WarnContext(ctx, "knowledge: renew lease", "documentId", ref.DocumentID, "err", err.Error())
		}
	}
}

// index does the work of one attempt and returns the chunk count.
func (s *Service) index(ctx context.Context, d Document) (int, error) {
	const op = "knowledge.index"
	a, err := s.o.Files.ReadyByID(ctx, d.UserID, d.AttachmentID)
	if err != nil {
		return 0, errs.Wrap(op, err)
	}
	data, err := s.o.Files.Read(ctx, a, attachmentMax)
	if err != nil {
		return 0, errs.Wrap(op, err)
	}
	text, err := extract(ctx, s.o.PDF, d.UserID, a.ContentType, data)
	data = nil
	if err != nil {
		return 0, err
	}
	chunks := SplitChunks(text, ChunkTokens, ChunkOverlap)
	if len(chunks) > MaxChunks {
		return 0, errs.E(op, errs.Invalid, CodeChunkLimit, fmt.Sprintf("the document makes %d chunks, more than the %d a knowledge base holds", len(chunks), MaxChunks))
	}
	vectors, err := s.embed(ctx, chunks)
	if err != nil {
		return 0, err
	}
	seg, err := json.Marshal(chunks)
	if err != nil {
		return 0, errs.Wrap(op, err)
	}
	if _, err := s.o.Blobs.Put(ctx, segmentKey(d.KnowledgeBaseID, d.ID), bytes.NewReader(seg), blob.PutOptions{ContentType: "application/json", Size: int64(len(seg))}); err != nil {
		return 0, errs.Wrap(op, err)
	}
	seg = nil
	if err := s.o.Vectors.PutDocument(ctx, d.KnowledgeBaseID, d.ID, vectors); err != nil {
		return 0, errs.Wrap(op, err)
	}
	return len(chunks), nil
}

// attachmentMax is the largest attachment (25 MiB).
const attachmentMax = 25 << 20

// embedBatch is how many texts one Embed call takes.
const embedBatch = 64

// embed returns the chunks' vectors as consecutive slices of one array
// (the embedded index keeps it without a copy).
func (s *Service) embed(ctx context.Context, chunks []Chunk) ([][]float32, error) {
	dims := s.o.Embedder.Dimensions()
	flat := make([]float32, len(chunks)*dims)
	out := make([][]float32, len(chunks))
	for i := range out {
		out[i] = flat[i*dims : (i+1)*dims : (i+1)*dims]
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for first := 0; first < len(chunks); first += embedBatch {
		last := min(first+embedBatch, len(chunks))
		g.Go(func() error {
			texts := make([]string, last-first)
			for i := range texts {
				texts[i] = chunks[first+i].Text
			}
			vs, err := s.o.Embedder.Embed(gctx, texts)
			if err != nil {
				return err
			}
			if len(vs) != len(texts) {
				return errs.E("knowledge.embed", errs.Internal, "", "the embedder answered a wrong number of vectors")
			}
			for i, v := range vs {
				if len(v) != dims {
					return errs.E("knowledge.embed", errs.Internal, "", fmt.Sprintf("the embedder answered %d dimensions, not %d", len(v), dims))
				}
				copy(out[first+i], v)
			}
			return nil
		})
	}
	return out, g.Wait()
}

// Resume is the sweeper's handler of an expired indexing job: it claims
// the job (a new attempt under a new lease) and hands it to the worker,
// or, after MaxAttempts, records the document failed.
func (s *Service) Resume(ctx context.Context, e job.Expired) error {
	const op = "knowledge.Resume"
	now := s.now()
	d, err := s.o.Store.ClaimIndexing(ctx, e.Collection, e.ID, now, now.Add(s.o.Lease))
	if errs.Is(err, errs.NotFound) || errs.Is(err, errs.Conflict) {
		return nil
	}
	if err != nil {
		return errs.Wrap(op, err)
	}
	ref := Ref{KnowledgeBaseID: d.KnowledgeBaseID, DocumentID: d.ID, Attempt: d.Attempt}
	if d.Attempt > MaxAttempts {
		d.Status, d.Error, d.UpdatedAt = StatusFailed, fmt.Sprintf("indexing was interrupted %d times", MaxAttempts), now
		// What the interrupted attempts wrote (vectors, a segment)
		// belongs to no ready document: deleted before the failure is
		// recorded, as Index does.
		s.dropIndexes(ctx, d)
		err := s.o.Store.FinishDocument(ctx, ref, d)
		if errs.Is(err, errs.NotFound) || errs.Is(err, errs.Conflict) {
			return nil
		}
		return errs.Wrap(op, err)
	}
	return errs.Wrap(op, s.o.Dispatch.Dispatch(ctx, ref))
}

// InProcess runs indexing jobs in this process, at most n at once; a job
// waiting for its turn renews its lease meanwhile, so that a queue of
// documents is not taken for interrupted jobs (after a crash the leases
// end and the sweeper starts them again).
type InProcess struct {
	s   *Service
	sem chan struct{}
	wg  sync.WaitGroup
}

// NewInProcess returns an InProcess over s running n jobs at once.
func NewInProcess(s *Service, n int) *InProcess {
	return &InProcess{s: s, sem: make(chan struct{}, max(n, 1))}
}

// Dispatch starts ref's attempt in a goroutine and never fails.
func (p *InProcess) Dispatch(ctx context.Context, ref Ref) error {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx := context.WithoutCancel(ctx)
		if !p.wait(ctx, ref) {
			return
		}
		defer func() { <-p.sem }()
		if err := p.s.Index(ctx, ref); err != nil {
			p.s.o.Logger.ErrorContext(ctx, "knowledge: index", "documentId", ref.DocumentID, "err", err.Error())
		}
		p.s.o.Logger.InfoContext(ctx, "knowledge: indexing attempt ended", "documentId", ref.DocumentID, "attempt", ref.Attempt)
	}()
	return nil
}

// wait takes a slot, renewing ref's lease every third of it until then;
// false when a renewal is refused (the document was deleted, or another
// attempt took it over).
func (p *InProcess) wait(ctx context.Context, ref Ref) bool {
	t := time.NewTicker(p.s.o.Lease / 3)
	defer t.Stop()
	for {
		select {
		case p.sem <- struct{}{}:
			return true
		case <-t.C:
			err := p.s.o.Store.RenewIndexing(ctx, ref, p.s.now().Add(p.s.o.Lease))
			if errs.Is(err, errs.Conflict) || errs.Is(err, errs.NotFound) {
				return false
			}
		}
	}
}

// Wait waits for the jobs started so far (tests).
func (p *InProcess) Wait() { p.wg.Wait() }
