package config

import "slices"

// Knowledge is the knowledge bases' (shared/knowledge).
type Knowledge struct {
	// KnowledgeEmbedder (KNOWLEDGE_EMBEDDER: builtin, bedrock or openai;
	// default builtin) chooses the embedder of documents and queries:
	// the built-in lexical one (offline), Bedrock's Titan Text Embeddings
	// V2, or an OpenAI-compatible /v1/embeddings endpoint
	// (KNOWLEDGE_EMBEDDING_URL). A knowledge base's vectors are made by
	// one embedder: changing it needs the documents indexed again.
	KnowledgeEmbedder string `env:"KNOWLEDGE_EMBEDDER" envDefault:"builtin"`
	// KnowledgeEmbeddingURL (KNOWLEDGE_EMBEDDING_URL) is the base URL of
	// the OpenAI-compatible endpoint (e.g. http://127.0.0.1:11434/v1).
	KnowledgeEmbeddingURL string `env:"KNOWLEDGE_EMBEDDING_URL" envTrimRight:"/"`
	// KnowledgeEmbeddingModel (KNOWLEDGE_EMBEDDING_MODEL) names the model
	// of the OpenAI-compatible endpoint or of Bedrock (default
	// amazon.titan-embed-text-v2:0).
	KnowledgeEmbeddingModel string `env:"KNOWLEDGE_EMBEDDING_MODEL"`
	// KnowledgeEmbeddingKey (KNOWLEDGE_EMBEDDING_KEY) is the endpoint's
	// API key; never logged.
	KnowledgeEmbeddingKey string `env:"KNOWLEDGE_EMBEDDING_KEY"`
	// KnowledgeVectorBucket and KnowledgeVectorIndex
	// (KNOWLEDGE_VECTOR_BUCKET, KNOWLEDGE_VECTOR_INDEX) name the S3
	// Vectors bucket and index in AWS. Unset locally: vectors are kept
	// in the folder DATA_FILE + ".vectors", or in memory without
	// DATA_FILE.
	KnowledgeVectorBucket string `env:"KNOWLEDGE_VECTOR_BUCKET"`
	KnowledgeVectorIndex  string `env:"KNOWLEDGE_VECTOR_INDEX"`
	// KnowledgeIndexFunction (KNOWLEDGE_INDEX_FUNCTION) is the name or
	// ARN of the Lambda function that indexes documents
	// (KnowledgeIndexFunction), invoked asynchronously with each
	// indexing job; unset (the dev server) the jobs run in process.
	KnowledgeIndexFunction string `env:"KNOWLEDGE_INDEX_FUNCTION"`
	// KnowledgeBasesPerUser (KNOWLEDGE_BASES_PER_USER, a positive integer;
	// default 50) caps each user's knowledge bases: 409
	// KNOWLEDGE_BASE_LIMIT past it.
	KnowledgeBasesPerUser int `env:"KNOWLEDGE_BASES_PER_USER" envDefault:"50"`
}

// Validate fails on an unknown embedder, an openai embedder without its
// URL, a vector bucket without its index and a cap that is not positive.
func (k Knowledge) Validate() error {
	var p problems
	if !slices.Contains([]string{"builtin", "bedrock", "openai"}, k.KnowledgeEmbedder) {
		p.add("KNOWLEDGE_EMBEDDER", "must be builtin, bedrock or openai, got %q", k.KnowledgeEmbedder)
	}
	if k.KnowledgeEmbedder == "openai" && k.KnowledgeEmbeddingURL == "" {
		p.add("KNOWLEDGE_EMBEDDING_URL", "must be set when KNOWLEDGE_EMBEDDER is openai")
	}
	p.httpURL("KNOWLEDGE_EMBEDDING_URL", k.KnowledgeEmbeddingURL)
	if (k.KnowledgeVectorBucket == "") != (k.KnowledgeVectorIndex == "") {
		p.add("KNOWLEDGE_VECTOR_INDEX", "KNOWLEDGE_VECTOR_BUCKET and KNOWLEDGE_VECTOR_INDEX are set together")
	}
	if k.KnowledgeBasesPerUser <= 0 {
		p.add("KNOWLEDGE_BASES_PER_USER", "must be a positive integer, got %d", k.KnowledgeBasesPerUser)
	}
	return p.err()
}
