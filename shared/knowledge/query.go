package knowledge

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/errs"
)

// QueryRequest is the body of POST .../:knowledgeBaseId/query.
type QueryRequest struct {
	Query string `json:"query"`
	TopK  *int   `json:"topK"`
}

// Validate checks the query (1 to MaxQueryChars characters: over it,
// QUERY_TOO_LONG) and topK (1-50).
func (r QueryRequest) Validate() error {
	const op = "knowledge.Query"
	n := utf8.RuneCountInString(r.Query)
	if n > MaxQueryChars {
		return errs.E(op, errs.Invalid, CodeQueryTooLong, fmt.Sprintf("the query is %d characters; at most %d are allowed", n, MaxQueryChars))
	}
	var bad errs.FieldErrors
	if len(Terms(r.Query)) == 0 {
		bad.Add("query", "must hold at least one word")
	}
	if r.TopK != nil && (*r.TopK < 1 || *r.TopK > MaxTopK) {
		bad.Add("topK", "must be an integer from 1 to %d", MaxTopK)
	}
	if len(bad) > 0 {
		return errs.Fields(op, bad...)
	}
	return nil
}

// candidates is how many chunks each ranking contributes to the fusion.
func candidates(topK int) int { return min(max(4*topK, 40), 100) }

// Query answers the topK chunks of userID's knowledge base kbID best for
// in.Query: the vector ranking and the BM25 ranking of the knowledge
// base's ready documents, fused by rank. Errors: NotFound
// KNOWLEDGE_BASE_NOT_FOUND, the embedder's and the vector index's
// (Unavailable).
func (s *Service) Query(ctx context.Context, userID, kbID string, in QueryRequest) ([]Result, error) {
	const op = "knowledge.Query"
	if err := in.Validate(); err != nil {
		return nil, err
	}
	topK := DefaultTopK
	if in.TopK != nil {
		topK = *in.TopK
	}
	if _, err := s.o.Store.KnowledgeBase(ctx, userID, kbID); err != nil {
		return nil, errs.Wrap(op, err)
	}
	docs, err := s.o.Store.Documents(ctx, kbID)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	ready := map[string]Document{}
	for _, d := range docs {
		if d.Status == StatusReady {
			ready[d.ID] = d
		}
	}
	if len(ready) == 0 {
		return []Result{}, nil
	}
	segs, err := s.loadSegments(ctx, kbID, ready)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	fused, err := Hybrid(ctx, s.o.Embedder, s.o.Vectors, kbID, segs, in.Query, topK)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	bySeg := make(map[string]*Segment, len(segs))
	for _, sg := range segs {
		bySeg[sg.DocumentID] = sg
	}
	out := make([]Result, len(fused))
	for i, f := range fused {
		c := bySeg[f.DocumentID].Chunks[f.Chunk]
		out[i] = Result{DocumentID: f.DocumentID, DocumentName: ready[f.DocumentID].Name, ChunkID: ChunkID(f.DocumentID, f.Chunk),
			Text: c.Text, Score: f.Score, Start: c.Start, End: c.End}
	}
	return out, nil
}

// Hybrid ranks the chunks of segs (the knowledge base kbID's ready
// documents) for query: the vector index's nearest (query embedded by
// emb) and BM25's best, candidates(topK) of each, fused by rank. Vectors
// of documents not in segs (deleted, not ready) are left out. It fails
// with the embedder's and the index's errors.
func Hybrid(ctx context.Context, emb Embedder, vectors VectorIndex, kbID string, segs []*Segment, query string, topK int) ([]Fused, error) {
	vs, err := emb.Embed(ctx, []string{query})
	if err != nil {
		return nil, err
	}
	near, err := vectors.Query(ctx, kbID, vs[0], candidates(topK))
	if err != nil {
		return nil, err
	}
	chunks := make(map[string]int, len(segs))
	for _, sg := range segs {
		chunks[sg.DocumentID] = len(sg.Chunks)
	}
	kept := near[:0]
	for _, m := range near {
		if n, ok := chunks[m.DocumentID]; ok && m.Chunk < n {
			kept = append(kept, m)
		}
	}
	return FuseRanks(topK, kept, SearchBM25(segs, query, candidates(topK))), nil
}

// loadSegments returns the segments of docs, from the cache or the blob
// store (8 reads at once).
func (s *Service) loadSegments(ctx context.Context, kbID string, docs map[string]Document) ([]*Segment, error) {
	var mu sync.Mutex
	out := make([]*Segment, 0, len(docs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for id := range docs {
		if sg := s.segments.get(id); sg != nil {
			out = append(out, sg)
			continue
		}
		g.Go(func() error {
			sg, err := s.readSegment(gctx, kbID, id)
			if errs.Is(err, errs.NotFound) {
				return nil // deleted meanwhile
			}
			if err != nil {
				return err
			}
			s.segments.put(sg)
			mu.Lock()
			out = append(out, sg)
			mu.Unlock()
			return nil
		})
	}
	return out, g.Wait()
}

func (s *Service) readSegment(ctx context.Context, kbID, docID string) (*Segment, error) {
	const op = "knowledge.readSegment"
	obj, err := s.o.Blobs.Get(ctx, segmentKey(kbID, docID))
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	if err != nil {
		return nil, errs.E(op, errs.Unavailable, "", "a document's index could not be read; retry shortly").WithCause(err)
	}
	var chunks []Chunk
	if err := json.Unmarshal(b, &chunks); err != nil {
		return nil, errs.Wrap(op, fmt.Errorf("segment of %s: %w", docID, err))
	}
	return NewSegment(docID, chunks), nil
}

// maxCachedChunks bounds the chunks the segment cache holds (least
// recently used segments go first).
const maxCachedChunks = 200000

// segmentCache keeps parsed segments by document id, bounded by their
// chunk count. Segments never change: a document is indexed once.
type segmentCache struct {
	mu     sync.Mutex
	max    int
	chunks int
	order  *list.List
	byID   map[string]*list.Element
}

func newSegmentCache(max int) *segmentCache {
	return &segmentCache{max: max, order: list.New(), byID: map[string]*list.Element{}}
}

func (c *segmentCache) get(id string) *Segment {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byID[id]; e != nil {
		c.order.MoveToFront(e)
		return e.Value.(*Segment)
	}
	return nil
}

func (c *segmentCache) put(sg *Segment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[sg.DocumentID]; ok {
		return
	}
	c.byID[sg.DocumentID] = c.order.PushFront(sg)
	c.chunks += len(sg.Chunks)
	for c.chunks > c.max && c.order.Len() > 1 {
		e := c.order.Back()
		old := e.Value.(*Segment)
		c.order.Remove(e)
		delete(c.byID, old.DocumentID)
		c.chunks -= len(old.Chunks)
	}
}

func (c *segmentCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byID[id]; e != nil {
		c.order.Remove(e)
		delete(c.byID, id)
		c.chunks -= len(e.Value.(*Segment).Chunks)
	}
}
