package knowledge

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/workflowchat/service/shared/errs"
)

// Match is one chunk a vector query found: the document, the chunk's
// index in it, and its similarity (higher is nearer).
type Match struct {
	DocumentID string
	Chunk      int
	Score      float32
}

// VectorIndex keeps the vectors of knowledge bases' chunks. A document's
// vectors are written once, whole, and deleted whole.
type VectorIndex interface {
	// PutDocument stores docID's vectors (vectors[i] is chunk i's) in
	// knowledge base kbID, replacing any it had. Unavailable when the
	// index cannot be reached.
	PutDocument(ctx context.Context, kbID, docID string, vectors [][]float32) error
	// Query returns up to topK chunks of kbID nearest to q, nearest
	// first. A knowledge base with no vectors answers none.
	Query(ctx context.Context, kbID string, q []float32, topK int) ([]Match, error)
	// DeleteDocument deletes docID's count vectors; deleting what is not
	// there succeeds.
	DeleteDocument(ctx context.Context, kbID, docID string, count int) error
}

// Embedded is the VectorIndex of one process: every knowledge base's
// vectors in memory, searched by brute force (a dot product with each
// vector), and, when it has a folder, one file per document there
// (<folder>/<kbId>/<docId>.vec: a header, the float32s, a CRC-32C), read
// back when a knowledge base is first searched. Brute force over 50,000
// chunks of 512 dimensions is 25.6 M multiply-adds: milliseconds.
type Embedded struct {
	dir  string
	mu   sync.RWMutex
	kbs  map[string]*kbVectors
	dims int
}

type kbVectors struct {
	loaded bool
	docs   map[string][]float32 // flat, dims per chunk
}

// NewEmbedded returns an Embedded index of vectors of dims float32s kept
// in dir ("" keeps them in memory only). It fails when dir cannot be
// made.
func NewEmbedded(dir string, dims int) (*Embedded, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("knowledge: vector folder: %w", err)
		}
	}
	return &Embedded{dir: dir, kbs: map[string]*kbVectors{}, dims: dims}, nil
}

const vecMagic = "WCV1"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (e *Embedded) path(kbID, docID string) string {
	return filepath.Join(e.dir, kbID, docID+".vec")
}

// kb returns kbID's vectors, read from the folder the first time. The
// caller holds e.mu for writing.
func (e *Embedded) kb(kbID string) (*kbVectors, error) {
	k := e.kbs[kbID]
	if k == nil {
		k = &kbVectors{docs: map[string][]float32{}}
		e.kbs[kbID] = k
	}
	if k.loaded || e.dir == "" {
		k.loaded = true
		return k, nil
	}
	ents, err := os.ReadDir(filepath.Join(e.dir, kbID))
	if err != nil && !os.IsNotExist(err) {
		return nil, errs.E("knowledge.Embedded", errs.Unavailable, "", "the vector index cannot be read").WithCause(err)
	}
	for _, ent := range ents {
		docID, ok := strings.CutSuffix(ent.Name(), ".vec")
		if !ok {
			continue
		}
		if _, have := k.docs[docID]; have {
			continue
		}
		v, err := e.readFile(filepath.Join(e.dir, kbID, ent.Name()))
		if err != nil {
			return nil, err
		}
		k.docs[docID] = v
	}
	k.loaded = true
	return k, nil
}

func (e *Embedded) readFile(path string) ([]float32, error) {
	const op = "knowledge.Embedded.read"
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.E(op, errs.Unavailable, "", "the vector index cannot be read").WithCause(err)
	}
	if len(b) < 12 || string(b[:4]) != vecMagic || crc32.Checksum(b[:len(b)-4], crcTable) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, errs.E(op, errs.Internal, "", "the vector index is damaged").WithCause(fmt.Errorf("%s: bad header or checksum", path))
	}
	dims := int(binary.LittleEndian.Uint32(b[4:8]))
	body := b[8 : len(b)-4]
	if dims != e.dims || len(body)%(4*dims) != 0 {
		return nil, errs.E(op, errs.Internal, "", "the vector index is damaged").WithCause(fmt.Errorf("%s: %d dimensions, want %d", path, dims, e.dims))
	}
	v := make([]float32, len(body)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
	}
	return v, nil
}

// PutDocument writes the document's file (to a temporary name, then
// renamed, so a crash leaves the old file or the new one) and keeps the
// vectors. Invalid when a vector has the wrong length.
func (e *Embedded) PutDocument(ctx context.Context, kbID, docID string, vectors [][]float32) error {
	const op = "knowledge.Embedded.PutDocument"
	for i, v := range vectors {
		if len(v) != e.dims {
			return errs.E(op, errs.Invalid, "", fmt.Sprintf("vector %d has %d dimensions, the index %d", i, len(v), e.dims))
		}
	}
	flat := contiguous(vectors, e.dims)
	if flat == nil {
		flat = make([]float32, 0, len(vectors)*e.dims)
		for _, v := range vectors {
			flat = append(flat, v...)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k, err := e.kb(kbID)
	if err != nil {
		return err
	}
	if e.dir != "" {
		if err := e.writeFile(e.path(kbID, docID), flat); err != nil {
			return errs.E(op, errs.Unavailable, "", "the vector index cannot be written").WithCause(err)
		}
	}
	k.docs[docID] = flat
	return nil
}

// contiguous returns the one array vectors are consecutive slices of
// (as Service.embed makes them), or nil: then no copy is needed.
func contiguous(vectors [][]float32, dims int) []float32 {
	n := len(vectors) * dims
	if len(vectors) == 0 || cap(vectors[0]) < n {
		return nil
	}
	base := vectors[0][:n:n]
	for i, v := range vectors {
		if &base[i*dims] != &v[0] {
			return nil
		}
	}
	return base
}

// writeFile writes flat to path through a temporary file, renamed once
// synced (a crash leaves the old file or the new one), streaming the
// floats (a 25,000-chunk document's vectors are 51 MB: no second copy).
func (e *Embedded) writeFile(path string, flat []float32) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	sum := crc32.New(crcTable)
	w := bufio.NewWriterSize(io.MultiWriter(f, sum), 1<<16)
	var word [4]byte
	_, _ = w.WriteString(vecMagic)
	binary.LittleEndian.PutUint32(word[:], uint32(e.dims))
	_, _ = w.Write(word[:])
	for _, x := range flat {
		binary.LittleEndian.PutUint32(word[:], math.Float32bits(x))
		_, _ = w.Write(word[:])
	}
	if err := w.Flush(); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(word[:], sum.Sum32())
	if _, err := f.Write(word[:]); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// DeleteDocument removes the document's vectors and file.
func (e *Embedded) DeleteDocument(ctx context.Context, kbID, docID string, count int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if k := e.kbs[kbID]; k != nil {
		delete(k.docs, docID)
	}
	if e.dir != "" {
		if err := os.Remove(e.path(kbID, docID)); err != nil && !os.IsNotExist(err) {
			return errs.E("knowledge.Embedded.DeleteDocument", errs.Unavailable, "", "the vector index cannot be written").WithCause(err)
		}
	}
	return nil
}

// Query scores every vector of kbID against q.
func (e *Embedded) Query(ctx context.Context, kbID string, q []float32, topK int) ([]Match, error) {
	e.mu.RLock()
	k := e.kbs[kbID]
	loaded := k != nil && k.loaded
	e.mu.RUnlock()
	if !loaded {
		e.mu.Lock()
		_, err := e.kb(kbID)
		e.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	top := &matchHeap{}
	for docID, flat := range e.kbs[kbID].docs {
		for i := 0; i+e.dims <= len(flat); i += e.dims {
			s := Dot(q, flat[i:i+e.dims])
			if top.Len() < topK {
				heap.Push(top, Match{DocumentID: docID, Chunk: i / e.dims, Score: s})
			} else if s > (*top)[0].Score {
				(*top)[0] = Match{DocumentID: docID, Chunk: i / e.dims, Score: s}
				heap.Fix(top, 0)
			}
		}
	}
	out := make([]Match, top.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(top).(Match)
	}
	return out, nil
}

// matchHeap is a min-heap of matches by score (ties by key, so results
// are deterministic).
type matchHeap []Match

func (h matchHeap) Len() int { return len(h) }
func (h matchHeap) Less(i, j int) bool {
	if h[i].Score != h[j].Score {
		return h[i].Score < h[j].Score
	}
	if h[i].DocumentID != h[j].DocumentID {
		return h[i].DocumentID > h[j].DocumentID
	}
	return h[i].Chunk > h[j].Chunk
}
func (h matchHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *matchHeap) Push(x any)   { *h = append(*h, x.(Match)) }
func (h *matchHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

var _ VectorIndex = (*Embedded)(nil)
