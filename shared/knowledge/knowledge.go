// Package knowledge is the domain of knowledge bases: a user's named
// collections of documents (made from ready attachments), indexed for
// retrieval and searched by a hybrid of vector similarity and BM25, fused
// by rank.
//
// A document's text is extracted (Extract), cut into overlapping chunks
// of words that keep byte offsets into that text (Chunk), embedded
// (Embedder) into a VectorIndex, and kept as a segment (its chunks and
// their terms) in the blob store, from which the lexical index (BM25) is
// built per document and cached. A query embeds the question, asks the
// vector index and the lexical index of the knowledge base's ready
// documents, and fuses both rankings (FuseRanks).
//
// The package imports no AWS code: the Bedrock and OpenAI-compatible
// embedders and the S3 Vectors index are adapters in subpackages.
package knowledge

import (
	"time"
)

// Status is a document's indexing status.
type Status string

// The statuses of a document.
const (
	StatusIndexing Status = "indexing"
	StatusReady    Status = "ready"
	StatusFailed   Status = "failed"
)

// Limits of knowledge bases.
const (
	// MaxDocuments is the most documents one knowledge base holds.
	MaxDocuments = 1000
	// MaxChunks is the most chunks one knowledge base holds.
	MaxChunks = 50000
	// MaxQueryChars is the longest query, in characters.
	MaxQueryChars = 10000
	// DefaultTopK and MaxTopK bound a query's results.
	DefaultTopK = 8
	MaxTopK     = 50
	// MaxNameChars and MaxDescriptionChars bound a knowledge base's name
	// and description, in characters.
	MaxNameChars        = 200
	MaxDescriptionChars = 2000
	// MaxKnowledgeBasesPerUser is the default per-user cap of knowledge
	// bases (KNOWLEDGE_BASES_PER_USER).
	MaxKnowledgeBasesPerUser = 50
	// MaxAttempts is how many times an interrupted indexing is started
	// again before its document fails.
	MaxAttempts = 3
)

// Codes of the errors of knowledge bases.
const (
	CodeKnowledgeBaseNotFound = "KNOWLEDGE_BASE_NOT_FOUND"
	CodeDocumentNotFound      = "DOCUMENT_NOT_FOUND"
	// CodeKnowledgeBaseLimit: the user has as many knowledge bases as
	// allowed (409).
	CodeKnowledgeBaseLimit = "KNOWLEDGE_BASE_LIMIT"
	// CodeDocumentLimit: the knowledge base holds MaxDocuments (409).
	CodeDocumentLimit = "DOCUMENT_LIMIT"
	// CodeQueryTooLong: a query over MaxQueryChars (400).
	CodeQueryTooLong = "QUERY_TOO_LONG"
	// CodeUnsupportedDocument: an attachment whose type cannot be
	// indexed (415).
	CodeUnsupportedDocument = "UNSUPPORTED_MEDIA_TYPE"
)

// KnowledgeBase is a user's named collection of documents.
type KnowledgeBase struct {
	ID            string    `json:"id"`
	UserID        string    `json:"-"`
	Name          string    `json:"name"`
	Description   string    `json:"description"`
	DocumentCount int       `json:"documentCount"`
	ChunkCount    int       `json:"chunkCount"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
	// Version changes with every write of the knowledge base's item;
	// updates are conditioned on it.
	Version int `json:"-"`
}

// Document is one attachment indexed into a knowledge base.
type Document struct {
	ID              string    `json:"id"`
	KnowledgeBaseID string    `json:"knowledgeBaseId"`
	UserID          string    `json:"-"`
	AttachmentID    string    `json:"attachmentId"`
	Name            string    `json:"name"`
	ContentType     string    `json:"contentType"`
	Size            int64     `json:"size"`
	Status          Status    `json:"status"`
	ChunkCount      *int      `json:"chunkCount,omitempty"`
	Error           string    `json:"error,omitempty"`
	CreatedAt       time.Time `json:"createdAt"`
	UpdatedAt       time.Time `json:"updatedAt"`
	// Attempt counts the indexings started (an interrupted one is started
	// again up to MaxAttempts).
	Attempt int `json:"-"`
}

// Ref names one document's indexing job: what a Dispatcher hands to the
// indexer.
type Ref struct {
	KnowledgeBaseID string `json:"knowledgeBaseId"`
	DocumentID      string `json:"documentId"`
	Attempt         int    `json:"attempt"`
}

// Result is one chunk a query found.
type Result struct {
	DocumentID   string  `json:"documentId"`
	DocumentName string  `json:"documentName"`
	ChunkID      string  `json:"chunkId"`
	Text         string  `json:"text"`
	Score        float64 `json:"score"`
	Start        int     `json:"start"`
	End          int     `json:"end"`
}

// Citation names the chunk a reply drew on.
type Citation struct {
	DocumentID string `json:"documentId"`
	ChunkID    string `json:"chunkId"`
	Start      int    `json:"start"`
	End        int    `json:"end"`
}

// JobKind is the kind of an indexing job in the job engine.
const JobKind = "knowledge_index"
