package knowledge

import (
	"context"
	"hash/fnv"
	"math"
)

// Embedder turns texts into vectors of Dimensions() float32s, one per
// text, in order. Implementations fail with Unavailable when their
// service cannot be reached, Invalid when it refuses a text.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dimensions is the length of every vector.
	Dimensions() int
	// Name identifies the model (stored with each document, so that a
	// change of model is visible).
	Name() string
}

// Dimensions is the length of the vectors of every embedder the service
// configures (Titan Text Embeddings V2 takes 256, 512 or 1024): the
// vector index is made for one length.
const Dimensions = 512

// Lexical is the built-in offline embedder: each text's terms (Terms) and
// pairs of adjacent terms are hashed into Dimensions buckets with a sign
// (feature hashing), weighted 1+log(count), and the vector normalized. It
// is deterministic and needs no network, so the product works offline as
// the built-in model does, but it is lexical: two texts are near only
// when they share words, never because they mean the same thing.
type Lexical struct{}

// Name is "builtin-lexical".
func (Lexical) Name() string { return "builtin-lexical" }

// Dimensions is Dimensions.
func (Lexical) Dimensions() int { return Dimensions }

// Embed never fails.
func (l Lexical) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = l.vector(t)
	}
	return out, nil
}

func (Lexical) vector(text string) []float32 {
	counts := map[uint32]float32{}
	terms := Terms(text)
	add := func(s string, w float32) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(s))
		counts[h.Sum32()] += w
	}
	for i, t := range terms {
		add(t, 1)
		if i > 0 {
			add(terms[i-1]+" "+t, 0.5)
		}
	}
	v := make([]float32, Dimensions)
	for h, c := range counts {
		w := float32(1 + math.Log(float64(c)+1e-9))
		if c < 1 {
			w = c
		}
		if h&0x80000000 != 0 {
			w = -w
		}
		v[h%Dimensions] += w
	}
	Normalize(v)
	return v
}

// Normalize scales v to unit length in place (a zero vector stays zero).
func Normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
}

// Dot returns the dot product of a and b (their cosine similarity when
// both are normalized).
func Dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	n := min(len(a), len(b))
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
