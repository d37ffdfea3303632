package knowledgetest

import (
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"sync"
)

// FakeS3Vectors serves the part of the S3 Vectors REST API the service
// uses (PutVectors, QueryVectors with an $eq filter on one metadata key,
// DeleteVectors; the index named by bucket and index or by its ARN) over
// vectors in memory, with the service's limits (500
// vectors a call, topK 1-100, one bucket and index): what the S3 Vectors
// index is checked against, as a real endpoint would be.
type FakeS3Vectors struct {
	Bucket, Index string
	Dims          int
	mu            sync.Mutex
	vectors       map[string]fakeVector
	// Calls counts the calls per operation.
	Calls map[string]int
	// refuse makes every call fail (Refuse).
	refuse bool
}

// Refuse makes every call fail (AccessDeniedException, which the SDK
// does not retry) while on is true: an index that cannot be reached.
func (f *FakeS3Vectors) Refuse(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = on
}

type fakeVector struct {
	data []float32
	meta map[string]any
}

// NewFakeS3Vectors returns a fake of one bucket and index of dims.
func NewFakeS3Vectors(bucket, index string, dims int) *FakeS3Vectors {
	return &FakeS3Vectors{Bucket: bucket, Index: index, Dims: dims, vectors: map[string]fakeVector{}, Calls: map[string]int{}}
}

// ARN is the index's ARN (what the stack passes as
// KNOWLEDGE_VECTOR_INDEX): in us-east-1 of account 123456789012.
func (f *FakeS3Vectors) ARN() string {
	return "arn:aws:s3vectors:us-east-1:123456789012:bucket/" + f.Bucket + "/index/" + f.Index
}

// Reset empties the index.
func (f *FakeS3Vectors) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vectors = map[string]fakeVector{}
}

// Count returns how many vectors the index holds.
func (f *FakeS3Vectors) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.vectors)
}

func fail(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func (f *FakeS3Vectors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct {
		VectorBucketName string `json:"vectorBucketName"`
		IndexName        string `json:"indexName"`
		IndexArn         string `json:"indexArn"`
		Vectors          []struct {
			Key      string                      `json:"key"`
			Data     struct{ Float32 []float32 } `json:"data"`
			Metadata map[string]any              `json:"metadata"`
		} `json:"vectors"`
		QueryVector    struct{ Float32 []float32 }  `json:"queryVector"`
		TopK           int                          `json:"topK"`
		Filter         map[string]map[string]string `json:"filter"`
		ReturnDistance bool                         `json:"returnDistance"`
		Keys           []string                     `json:"keys"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&in) != nil {
		fail(w, 400, "ValidationException", "bad request")
		return
	}
	if in.IndexArn != "" && f.ARN() == in.IndexArn {
		in.VectorBucketName, in.IndexName = f.Bucket, f.Index
	}
	if in.VectorBucketName != f.Bucket || in.IndexName != f.Index {
		fail(w, 404, "NotFoundException", "no such index")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls[r.URL.Path]++
	if f.refuse {
		fail(w, 403, "AccessDeniedException", "refused")
		return
	}
	switch r.URL.Path {
	case "/PutVectors":
		if len(in.Vectors) == 0 || len(in.Vectors) > 500 {
			fail(w, 400, "ValidationException", "1 to 500 vectors")
			return
		}
		for _, v := range in.Vectors {
			if len(v.Data.Float32) != f.Dims || v.Key == "" {
				fail(w, 400, "ValidationException", "dimension mismatch")
				return
			}
		}
		for _, v := range in.Vectors {
			f.vectors[v.Key] = fakeVector{data: v.Data.Float32, meta: v.Metadata}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{})
	case "/QueryVectors":
		if in.TopK < 1 || in.TopK > 100 || len(in.QueryVector.Float32) != f.Dims {
			fail(w, 400, "ValidationException", "topK 1-100 and the index's dimension")
			return
		}
		type hit struct {
			Key      string  `json:"key"`
			Distance float32 `json:"distance"`
		}
		var hits []hit
		for k, v := range f.vectors {
			ok := true
			for field, cond := range in.Filter {
				if v.meta[field] != cond["$eq"] {
					ok = false
				}
			}
			if ok {
				hits = append(hits, hit{Key: k, Distance: cosineDistance(in.QueryVector.Float32, v.data)})
			}
		}
		sort.Slice(hits, func(i, j int) bool {
			if hits[i].Distance != hits[j].Distance {
				return hits[i].Distance < hits[j].Distance
			}
			return hits[i].Key < hits[j].Key
		})
		if len(hits) > in.TopK {
			hits = hits[:in.TopK]
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"vectors": hits, "distanceMetric": "cosine"})
	case "/DeleteVectors":
		if len(in.Keys) == 0 || len(in.Keys) > 500 {
			fail(w, 400, "ValidationException", "1 to 500 keys")
			return
		}
		for _, k := range in.Keys {
			delete(f.vectors, k)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{})
	default:
		fail(w, 404, "UnknownOperationException", "unknown operation")
	}
}

func cosineDistance(a, b []float32) float32 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 1
	}
	return float32(1 - dot/math.Sqrt(na*nb))
}
