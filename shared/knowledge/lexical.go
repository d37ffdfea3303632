package knowledge

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"strings"
)

// BM25 parameters (the usual ones).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Segment is one document's chunks with their terms: the unit of the
// lexical index. A knowledge base's BM25 statistics (chunk count, mean
// length, each term's document frequency) are summed over its segments
// for the query's terms only, so adding or deleting a document never
// rebuilds the others' indexes.
type Segment struct {
	DocumentID string
	Chunks     []Chunk
	postings   map[string][]posting
	lengths    []int32
	total      int64
}

type posting struct {
	chunk int32
	tf    int32
}

// NewSegment indexes chunks of document docID.
func NewSegment(docID string, chunks []Chunk) *Segment {
	s := &Segment{DocumentID: docID, Chunks: chunks, postings: map[string][]posting{}, lengths: make([]int32, len(chunks))}
	for i, c := range chunks {
		terms := Terms(c.Text)
		s.lengths[i] = int32(len(terms))
		s.total += int64(len(terms))
		tf := map[string]int32{}
		for _, t := range terms {
			tf[t]++
		}
		for t, n := range tf {
			s.postings[t] = append(s.postings[t], posting{chunk: int32(i), tf: n})
		}
	}
	return s
}

// SearchBM25 returns up to topK chunks of segs ranked by BM25 for
// query's terms, best first.
func SearchBM25(segs []*Segment, query string, topK int) []Match {
	terms := uniq(Terms(query))
	if len(terms) == 0 || topK < 1 {
		return nil
	}
	var n, total int64
	df := make([]int64, len(terms))
	for _, s := range segs {
		n += int64(len(s.Chunks))
		total += s.total
		for i, t := range terms {
			df[i] += int64(len(s.postings[t]))
		}
	}
	if n == 0 {
		return nil
	}
	avg := float64(total) / float64(n)
	top := &matchHeap{}
	scores := map[int32]float64{}
	for _, s := range segs {
		clear(scores)
		for i, t := range terms {
			if df[i] == 0 {
				continue
			}
			idf := math.Log(1 + (float64(n)-float64(df[i])+0.5)/(float64(df[i])+0.5))
			for _, p := range s.postings[t] {
				tf := float64(p.tf)
				norm := bm25K1 * (1 - bm25B + bm25B*float64(s.lengths[p.chunk])/avg)
				scores[p.chunk] += idf * tf * (bm25K1 + 1) / (tf + norm)
			}
		}
		for c, sc := range scores {
			m := Match{DocumentID: s.DocumentID, Chunk: int(c), Score: float32(sc)}
			if top.Len() < topK {
				heap.Push(top, m)
			} else if (matchHeap{m, (*top)[0]}).Less(1, 0) {
				(*top)[0] = m
				heap.Fix(top, 0)
			}
		}
	}
	out := make([]Match, top.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(top).(Match)
	}
	return out
}

func uniq(ts []string) []string {
	seen := map[string]bool{}
	out := ts[:0:0]
	for _, t := range ts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// RRFK is the constant of reciprocal rank fusion: a result's fused score
// is the sum over rankings of 1/(RRFK + its rank), rank 1 the best.
const RRFK = 60

// Fused is one result of FuseRanks.
type Fused struct {
	DocumentID string
	Chunk      int
	Score      float64
}

// FuseRanks merges rankings (each best first) by reciprocal rank fusion
// and returns the topK best, ties broken by document and chunk so the
// order is deterministic.
func FuseRanks(topK int, rankings ...[]Match) []Fused {
	type key struct {
		doc   string
		chunk int
	}
	score := map[key]float64{}
	var order []key
	for _, r := range rankings {
		for rank, m := range r {
			k := key{m.DocumentID, m.Chunk}
			if _, ok := score[k]; !ok {
				order = append(order, k)
			}
			score[k] += 1 / float64(RRFK+rank+1)
		}
	}
	out := make([]Fused, len(order))
	for i, k := range order {
		out[i] = Fused{DocumentID: k.doc, Chunk: k.chunk, Score: score[k]}
	}
	sortFused(out)
	if len(out) > topK {
		out = out[:topK]
	}
	return out
}

func sortFused(f []Fused) {
	slices.SortFunc(f, func(a, b Fused) int {
		if a.Score != b.Score {
			return cmp.Compare(b.Score, a.Score)
		}
		if c := strings.Compare(a.DocumentID, b.DocumentID); c != 0 {
			return c
		}
		return cmp.Compare(a.Chunk, b.Chunk)
	})
}
