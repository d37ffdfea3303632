package knowledge

import (
	"context"
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
// pairs of adjacent terms (at half weight) are hashed (FNV-1a) into
// Dimensions buckets with a sign (feature hashing), each bucket's weight
// damped to 1+log(weight) past 1, and the vector normalized. It
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
	v := make([]float32, Dimensions)
	prev := ""
	for _, t := range Terms(text) {
		addFeature(v, fnv32a(fnvOffset, t), 1)
		if prev != "" {
			addFeature(v, fnv32a(fnv32a(fnv32a(fnvOffset, prev), " "), t), 0.5)
		}
		prev = t
	}
	// Repeated words count sublinearly: each bucket's weight w becomes
	// 1+log(w) past 1 (keeping its sign).
	for i, x := range v {
		if a := float32(math.Abs(float64(x))); a > 1 {
			v[i] = float32(math.Copysign(1+math.Log(float64(a)), float64(x)))
		}
	}
	Normalize(v)
	return v
}

// addFeature adds w to feature h's bucket, with the sign h's top bit
// gives (so that collisions cancel out on average).
func addFeature(v []float32, h uint32, w float32) {
	if h&0x80000000 != 0 {
		w = -w
	}
	v[h%Dimensions] += w
}

// FNV-1a, 32 bits, over strings without allocating.
const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

func fnv32a(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnvPrime
	}
	return h
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
