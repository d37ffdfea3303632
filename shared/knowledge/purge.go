package knowledge

import (
	"context"
	"errors"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// Purge is the durable record that a deleted document's, or a deleted
// knowledge base's documents', vectors and segments are to be deleted:
// written in the transaction that deletes the document or the knowledge
// base, so that a crash or an unreachable vector index after it leaves
// the work queued instead of the vectors behind. Its first pass runs at
// once, the sweeper runs it again when it is due; a last pass at FinalAt
// (after any indexing attempt that was running at the delete must have
// ended, IndexTimeout after it, with the lease's margin) catches what
// such an attempt wrote late, then the purge (with a knowledge base's
// collection, kept until then as the list of its documents) is removed.
type Purge struct {
	KnowledgeBaseID string
	// DocumentID is the deleted document's; "" for a whole knowledge
	// base (its documents are read from its collection).
	DocumentID string
	// Chunks is the document's chunk count; 0 when it was not ready
	// (then up to MaxChunks keys are deleted).
	Chunks int
	// DueAt is when the sweeper runs the purge next; FinalAt when its
	// last pass may run.
	DueAt, FinalAt time.Time
}

// purgeRetry is how long a purge whose pass failed waits for the next.
const purgeRetry = time.Minute

// MaxPurgesPerSweep bounds the purges one sweep runs.
const MaxPurgesPerSweep = 25

// newPurge is the purge of a delete at now.
func (s *Service) newPurge(kbID, docID string, chunks int) Purge {
	now := s.now()
	return Purge{KnowledgeBaseID: kbID, DocumentID: docID, Chunks: chunks, DueAt: now.Add(purgeRetry),
		FinalAt: now.Add(s.o.IndexTimeout + 2*s.o.Lease + time.Minute)}
}

// runPurge runs one pass of p: every document's vectors and segment are
// deleted; then, at or after p.FinalAt, the purge is finished, else it
// is due again at p.FinalAt. A failed pass is due again in a minute.
// It returns whether the purge is finished.
func (s *Service) runPurge(ctx context.Context, p Purge) (bool, error) {
	const op = "knowledge.runPurge"
	docs := []Document{{ID: p.DocumentID, KnowledgeBaseID: p.KnowledgeBaseID}}
	if p.Chunks > 0 {
		docs[0].ChunkCount = &p.Chunks
	}
	if p.DocumentID == "" {
		var err error
		if docs, err = s.o.Store.Documents(ctx, p.KnowledgeBaseID); err != nil {
			return false, s.deferPurge(ctx, p, errs.Wrap(op, err))
		}
	}
	var failed []error
	for _, d := range docs {
		if d.Status != StatusReady {
			// What an attempt may have written, whatever its count.
			d.ChunkCount = nil
			if p.DocumentID != "" && p.Chunks > 0 {
				d.ChunkCount = &p.Chunks
			}
		}
		if err := s.dropIndexesErr(ctx, d); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return false, s.deferPurge(ctx, p, errs.Wrap(op, errors.Join(failed...)))
	}
	if s.now().Before(p.FinalAt) {
		return false, errs.Wrap(op, s.o.Store.DeferPurge(ctx, p, p.FinalAt))
	}
	return true, errs.Wrap(op, s.o.Store.FinishPurge(ctx, p))
}

// deferPurge makes p due again after a failed pass and returns cause.
func (s *Service) deferPurge(ctx context.Context, p Purge, cause error) error {
	if err := s.o.Store.DeferPurge(ctx, p, s.now().Add(purgeRetry)); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// purgeNow runs the first pass of p right after its delete, logging a
// failure (the sweeper runs it again when it is due).
func (s *Service) purgeNow(ctx context.Context, p Purge) {
	if _, err := s.runPurge(context.WithoutCancel(ctx), p); err != nil {
		s.o.Logger.WarnContext(ctx, "knowledge: purge", "knowledgeBaseId", p.KnowledgeBaseID, "documentId", p.DocumentID, "err", err.Error())
	}
}

// SweepPurges runs the purges that are due (the sweeper's task): it
// returns how many it finished, and the failures joined (each failed one
// is due again in a minute).
func (s *Service) SweepPurges(ctx context.Context) (int, error) {
	ps, err := s.o.Store.Purges(ctx, s.now(), MaxPurgesPerSweep)
	if err != nil {
		return 0, errs.Wrap("knowledge.SweepPurges", err)
	}
	n := 0
	var failed []error
	for _, p := range ps {
		done, err := s.runPurge(ctx, p)
		if err != nil {
			failed = append(failed, err)
		}
		if done && err == nil {
			n++
		}
	}
	return n, errors.Join(failed...)
}

// dropIndexesErr deletes d's vectors and segment (all MaxChunks keys
// when its count is unknown) and returns the first failure.
func (s *Service) dropIndexesErr(ctx context.Context, d Document) error {
	n := MaxChunks
	if d.ChunkCount != nil {
		n = *d.ChunkCount
	}
	if err := s.o.Vectors.DeleteDocument(ctx, d.KnowledgeBaseID, d.ID, n); err != nil {
		return err
	}
	if err := s.o.Blobs.Delete(ctx, segmentKey(d.KnowledgeBaseID, d.ID)); err != nil && !errs.Is(err, errs.NotFound) {
		return err
	}
	s.segments.drop(d.ID)
	return nil
}
