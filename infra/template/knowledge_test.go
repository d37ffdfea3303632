package template_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The knowledge bases in AWS: the vector bucket and index of the stack,
// the grants on them, the embedding model's, and the indexing function
// with the invokes that hand it jobs.

const (
	vectorBucketID   = "KnowledgeVectorBucket"
	vectorIndexID    = "KnowledgeVectorIndex"
	knowledgeIndexID = "KnowledgeIndexFunction"
	embedderParam    = "KnowledgeEmbedder"
	embedCondition   = "KnowledgeBedrockEmbeddings"
	// titanV2ARN is the one model the embedding statements may name:
	// Titan Text Embeddings V2 in the stack's region
	// (bedrockembed.DefaultModel).
	titanV2ARN = subMark + "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/amazon.titan-embed-text-v2:0"
	// indexAttemptSeconds bounds one indexing attempt
	// (knowledge.Options.IndexTimeout's default, 10 minutes): the
	// function must outlive it to record the attempt's failure.
	indexAttemptSeconds = 600
)

// wantVectorGrants are the S3 Vectors calls each function makes
// (shared/knowledge/s3vectorindex: a query with a metadata filter needs
// GetVectors too), all on the stack's one index: KnowledgeFunction
// queries and deletes with documents and knowledge bases, the indexing
// function writes and deletes a failed attempt's, the sweeper's account
// erasure deletes, and the chat functions query (a reply's retrieval
// from the knowledge bases its chat names, knowledge_search) without
// writing.
var wantVectorGrants = map[string][]string{
	"KnowledgeFunction": {"s3vectors:QueryVectors", "s3vectors:GetVectors", "s3vectors:DeleteVectors"},
	knowledgeIndexID:    {"s3vectors:PutVectors", "s3vectors:DeleteVectors"},
	"SweeperFunction":   {"s3vectors:DeleteVectors"},
	"ChatsFunction":     {"s3vectors:QueryVectors", "s3vectors:GetVectors"},
	"StreamFunction":    {"s3vectors:QueryVectors", "s3vectors:GetVectors"},
	// knowledge_search in workflow steps, ranked as the chats rank.
	"RunnerFunction": {"s3vectors:QueryVectors", "s3vectors:GetVectors"},
}

// wantEmbedders embed with Bedrock (a query's question, a document's
// chunks; the chat functions a reply's query, with the documents' model);
// wantIndexInvokers hand indexing jobs to the indexing function (a
// document added; an expired job's next attempt).
var (
	wantEmbedders     = []string{"KnowledgeFunction", knowledgeIndexID, "ChatsFunction", "StreamFunction", "RunnerFunction"}
	wantIndexInvokers = []string{"KnowledgeFunction", "SweeperFunction"}
)

func isVectorsStatement(stmt map[string]any) bool {
	for _, a := range strs(stmt["Action"]) {
		if strings.HasPrefix(a, "s3vectors:") {
			return true
		}
	}
	return false
}

// isEmbeddingActions: a statement of bedrock:InvokeModel alone, the
// embedders' (checkKnowledge's; the model providers' are check (k)'s).
func isEmbeddingActions(actions []string) bool {
	return len(actions) == 1 && actions[0] == "bedrock:InvokeModel"
}

// isKnowledgeIndexInvoke: a lambda:InvokeFunction statement on the
// indexing function (checkKnowledge's; every other invoke is check (m)'s).
func isKnowledgeIndexInvoke(stmt map[string]any) bool {
	return isInvokeStatement(stmt) && slices.Contains(strs(stmt["Resource"]), getAttMark+knowledgeIndexID+".Arn")
}

// statements returns function id's policy statements of the raw view
// that match.
func statements(s *stack, id string, match func(map[string]any) bool) []map[string]any {
	var out []map[string]any
	docs, _ := asMap(s.resources()[id]["Properties"])["Policies"].([]any)
	for _, d := range docs {
		stmts, _ := asMap(d)["Statement"].([]any)
		for _, st := range stmts {
			if m := asMap(st); m != nil && match(m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// checkKnowledge: (1) the vector bucket and its index are resources of
// the stack (512 float32 dimensions, cosine, retained), and every
// function that reaches them gets exactly the S3 Vectors calls its code
// makes (wantVectorGrants) on the index's ARN only, with
// KNOWLEDGE_VECTOR_BUCKET and KNOWLEDGE_VECTOR_INDEX naming them; (2)
// bedrock:InvokeModel alone, on Titan Text Embeddings V2 only, only for
// the functions that embed, under the KnowledgeBedrockEmbeddings
// condition, with KNOWLEDGE_EMBEDDER the parameter's; (3) the indexing
// function has no route, URL or schedule, Lambda does not retry its
// events (the sweeper counts the attempts), it outlives an attempt, and
// exactly the invokers may invoke it, on its ARN alone, with
// KNOWLEDGE_INDEX_FUNCTION naming it.
func checkKnowledge(s *stack) []string {
	var probs []string
	res := s.resources()
	if t := s.resourceType(vectorBucketID); t != "AWS::S3Vectors::VectorBucket" {
		probs = append(probs, fmt.Sprintf("%s: type %q, want AWS::S3Vectors::VectorBucket", vectorBucketID, t))
	}
	if t := s.resourceType(vectorIndexID); t != "AWS::S3Vectors::Index" {
		probs = append(probs, fmt.Sprintf("%s: type %q, want AWS::S3Vectors::Index", vectorIndexID, t))
	}
	ix := asMap(res[vectorIndexID]["Properties"])
	want := map[string]any{"VectorBucketArn": getAttMark + vectorBucketID + ".VectorBucketArn", "DataType": "float32",
		"Dimension": float64(512), "DistanceMetric": "cosine"}
	for k, v := range want {
		if !reflect.DeepEqual(ix[k], v) {
			probs = append(probs, fmt.Sprintf("%s: %s %v, want %v (knowledge.Dimensions, the embedders' unit vectors)", vectorIndexID, k, ix[k], v))
		}
	}
	if keys := strs(asMap(ix["MetadataConfiguration"])["NonFilterableMetadataKeys"]); slices.Contains(keys, "kb") {
		probs = append(probs, vectorIndexID+": \"kb\" is non-filterable; a query filters on it")
	}
	for _, id := range []string{vectorBucketID, vectorIndexID} {
		if res[id]["DeletionPolicy"] != "Retain" || res[id]["UpdateReplacePolicy"] != "Retain" {
			probs = append(probs, fmt.Sprintf("%s: DeletionPolicy %v, UpdateReplacePolicy %v, want Retain (the stack's data)", id, res[id]["DeletionPolicy"], res[id]["UpdateReplacePolicy"]))
		}
	}
	indexARN := getAttMark + vectorIndexID + ".IndexArn"

	for _, id := range sortedKeys(s.functions) {
		env := s.env(s.functions[id])
		// (1) vectors.
		var got []string
		for _, st := range statements(s, id, isVectorsStatement) {
			acts := strs(st["Action"])
			for _, a := range acts {
				if !strings.HasPrefix(a, "s3vectors:") {
					probs = append(probs, fmt.Sprintf("%s: S3 Vectors statement with %s; give it a statement of its own", id, a))
				}
			}
			if r := strs(st["Resource"]); !slices.Equal(r, []string{indexARN}) || st["Effect"] != "Allow" {
				probs = append(probs, fmt.Sprintf("%s: S3 Vectors on %v, want !GetAtt %s.IndexArn alone", id, r, vectorIndexID))
			}
			for _, k := range []string{"NotAction", "NotResource", "Condition"} {
				if _, ok := st[k]; ok {
					probs = append(probs, fmt.Sprintf("%s: S3 Vectors statement with %s", id, k))
				}
			}
			got = append(got, acts...)
		}
		slices.Sort(got)
		wantActs := slices.Sorted(slices.Values(wantVectorGrants[id]))
		if !slices.Equal(got, wantActs) {
			probs = append(probs, fmt.Sprintf("%s: S3 Vectors actions %v, want %v", id, got, wantActs))
		}
		if len(wantActs) > 0 {
			if env["KNOWLEDGE_VECTOR_INDEX"] != indexARN || env["KNOWLEDGE_VECTOR_BUCKET"] != getAttMark+vectorBucketID+".VectorBucketArn" {
				probs = append(probs, fmt.Sprintf("%s: KNOWLEDGE_VECTOR_BUCKET %q and KNOWLEDGE_VECTOR_INDEX %q, want the stack's bucket and index ARNs", id, env["KNOWLEDGE_VECTOR_BUCKET"], env["KNOWLEDGE_VECTOR_INDEX"]))
			}
		} else if env["KNOWLEDGE_VECTOR_INDEX"] != "" || env["KNOWLEDGE_VECTOR_BUCKET"] != "" {
			probs = append(probs, id+": receives the vector index but has no access to it")
		}

		// (3) invokes of the indexing function.
		invokes := statements(s, id, isKnowledgeIndexInvoke)
		invoker := slices.Contains(wantIndexInvokers, id)
		for _, st := range invokes {
			if a, r := strs(st["Action"]), strs(st["Resource"]); len(a) != 1 || len(r) != 1 || st["Effect"] != "Allow" {
				probs = append(probs, fmt.Sprintf("%s: invoke statement %v, want lambda:InvokeFunction alone on !GetAtt %s.Arn", id, st, knowledgeIndexID))
			}
		}
		switch {
		case invoker && len(invokes) != 1:
			probs = append(probs, fmt.Sprintf("%s: %d invoke statements of %s, want 1 (it hands indexing jobs to it)", id, len(invokes), knowledgeIndexID))
		case !invoker && len(invokes) > 0:
			probs = append(probs, fmt.Sprintf("%s: may invoke %s but hands it no jobs", id, knowledgeIndexID))
		}
		if got, has := env["KNOWLEDGE_INDEX_FUNCTION"]; (invoker && got != refMark+knowledgeIndexID) || (!invoker && has) {
			probs = append(probs, fmt.Sprintf("%s: KNOWLEDGE_INDEX_FUNCTION %q, want !Ref %s only in %v", id, got, knowledgeIndexID, wantIndexInvokers))
		}
		embedder := slices.Contains(wantEmbedders, id)
		if got, has := env["KNOWLEDGE_EMBEDDER"]; (embedder && got != refMark+embedderParam) || (!embedder && has) {
			probs = append(probs, fmt.Sprintf("%s: KNOWLEDGE_EMBEDDER %q, want !Ref %s only in %v", id, got, embedderParam, wantEmbedders))
		}
	}

	// (2) the embedding model.
	if c := asMap(s.tree["Conditions"])[embedCondition]; !reflect.DeepEqual(c, map[string]any{"Fn::Equals": []any{refMark + embedderParam, "bedrock"}}) {
		probs = append(probs, fmt.Sprintf("Conditions.%s %v, want !Equals [!Ref %s, bedrock]", embedCondition, c, embedderParam))
	}
	if p := asMap(asMap(s.raw["Parameters"])[embedderParam]); !reflect.DeepEqual(p["AllowedValues"], []any{"bedrock", "builtin"}) {
		probs = append(probs, fmt.Sprintf("Parameters.%s: AllowedValues %v, want [bedrock, builtin] (an openai embedder has no stack parameters)", embedderParam, p["AllowedValues"]))
	}
	granted := map[string]bool{}
	for _, b := range statementsOf(s, func(actions []string) bool { return slices.Contains(actions, "bedrock:InvokeModel") }) {
		granted[b.fn] = true
		if !slices.Contains(wantEmbedders, b.fn) {
			probs = append(probs, fmt.Sprintf("%s: bedrock:InvokeModel but it embeds nothing", b.where))
		}
		if a := strs(b.stmt["Action"]); !isEmbeddingActions(a) {
			probs = append(probs, fmt.Sprintf("%s: actions %v, want bedrock:InvokeModel alone", b.where, a))
		}
		if r := strs(b.stmt["Resource"]); !slices.Equal(r, []string{titanV2ARN}) || b.stmt["Effect"] != "Allow" {
			probs = append(probs, fmt.Sprintf("%s: bedrock:InvokeModel on %v, want Titan Text Embeddings V2 alone (%s)", b.where, r, strings.TrimPrefix(titanV2ARN, subMark)))
		}
		if b.cond != embedCondition {
			probs = append(probs, fmt.Sprintf("%s: under condition %q, want !If [%s, {policy}, !Ref AWS::NoValue]", b.where, b.cond, embedCondition))
		}
	}
	for _, id := range wantEmbedders {
		if !granted[id] {
			probs = append(probs, fmt.Sprintf("%s: embeds with Bedrock but has no bedrock:InvokeModel on Titan Text Embeddings V2", id))
		}
	}

	// (3) the indexing function itself.
	fn, ok := s.functions[knowledgeIndexID]
	if !ok {
		return append(probs, knowledgeIndexID+": missing; nothing would index documents in AWS")
	}
	if len(fn.Events) > 0 || fn.FunctionUrlConfig != nil {
		probs = append(probs, knowledgeIndexID+": has events or a function URL; it is invoked only asynchronously by "+strings.Join(wantIndexInvokers, ", "))
	}
	props := asMap(res[knowledgeIndexID]["Properties"])
	if r := asMap(props["EventInvokeConfig"])["MaximumRetryAttempts"]; r != float64(0) {
		probs = append(probs, fmt.Sprintf("%s: EventInvokeConfig.MaximumRetryAttempts %v, want 0 (the sweeper starts an attempt again, and counts it)", knowledgeIndexID, r))
	}
	if t := deref(fn.Timeout); t <= indexAttemptSeconds {
		probs = append(probs, fmt.Sprintf("%s: Timeout %d, want more than an attempt's %d s", knowledgeIndexID, t, indexAttemptSeconds))
	}
	return probs
}

// TestKnowledge runs checkKnowledge on template.yaml, and on the
// template broken one way per case, which it must report.
func TestKnowledge(t *testing.T) {
	t.Parallel()
	src := string(loadTemplate(t))
	s, err := parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkKnowledge(s) {
		t.Error(p)
	}
	cases := []struct{ name, old, new, want string }{
		{"a hand-made index by name", "KNOWLEDGE_VECTOR_INDEX: !GetAtt KnowledgeVectorIndex.IndexArn", "KNOWLEDGE_VECTOR_INDEX: chunks", "want the stack's bucket and index ARNs"},
		{"another dimension", "      Dimension: 512\n", "      Dimension: 1024\n", "Dimension 1024"},
		{"vectors on every index", "Resource: [!GetAtt KnowledgeVectorIndex.IndexArn]", `Resource: ["*"]`, "want !GetAtt KnowledgeVectorIndex.IndexArn alone"},
		{"a write the queries do not make", "Action: [s3vectors:QueryVectors, s3vectors:GetVectors, s3vectors:DeleteVectors]",
			"Action: [s3vectors:PutVectors, s3vectors:QueryVectors, s3vectors:GetVectors, s3vectors:DeleteVectors]", "KnowledgeFunction: S3 Vectors actions"},
		{"every model", "foundation-model/amazon.titan-embed-text-v2:0", "foundation-model/*", "want Titan Text Embeddings V2 alone"},
		{"embeddings without the condition", "          - KnowledgeBedrockEmbeddings\n", "          - TracingEnabled\n", "want !If [KnowledgeBedrockEmbeddings"},
		{"Lambda retries attempts", "        MaximumRetryAttempts: 0\n", "        MaximumRetryAttempts: 2\n", "MaximumRetryAttempts 2"},
		{"the invoke of the index function dropped", "            - Sid: InvokeKnowledgeIndex\n              Effect: Allow\n              Action: [lambda:InvokeFunction]\n              Resource: [!GetAtt KnowledgeIndexFunction.Arn]\n",
			"", "invoke statements of KnowledgeIndexFunction, want 1"},
		{"a chat function writes vectors", "Action: [s3vectors:QueryVectors, s3vectors:GetVectors]\n",
			"Action: [s3vectors:QueryVectors, s3vectors:GetVectors, s3vectors:PutVectors]\n", "ChatsFunction: S3 Vectors actions"},
		{"a chat function on a hand-made index", "Action: [s3vectors:QueryVectors, s3vectors:GetVectors]\n              Resource: [!GetAtt KnowledgeVectorIndex.IndexArn]",
			"Action: [s3vectors:QueryVectors, s3vectors:GetVectors]\n              Resource: [!Sub \"arn:${AWS::Partition}:s3vectors:${AWS::Region}:${AWS::AccountId}:bucket/kb/index/chunks\"]", "ChatsFunction: S3 Vectors on"},
		{"a chat function embeds with another model", "KNOWLEDGE_EMBEDDER: !Ref KnowledgeEmbedder\n", "KNOWLEDGE_EMBEDDER: builtin\n", "ChatsFunction: KNOWLEDGE_EMBEDDER"},
		{"a chat function embeds without Bedrock's grant", "        - !If\n          - KnowledgeBedrockEmbeddings\n          - Version: \"2012-10-17\"\n            Statement:\n              - Sid: Embeddings\n                Effect: Allow\n                Action: [bedrock:InvokeModel]\n                Resource: [!Sub \"arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/amazon.titan-embed-text-v2:0\"]\n          - !Ref AWS::NoValue\n        # Amazon Bedrock, only when BedrockModels is set",
			"        # Amazon Bedrock, only when BedrockModels is set", "ChatsFunction: embeds with Bedrock but has no bedrock:InvokeModel"},
		{"an attempt outlives its function", "      Timeout: 900\n      MemorySize: 1024\n      EventInvokeConfig:", "      Timeout: 300\n      MemorySize: 1024\n      EventInvokeConfig:", "Timeout 300"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(src, c.old) {
				t.Fatalf("template.yaml no longer contains %q", c.old)
			}
			broken, err := parse([]byte(strings.Replace(src, c.old, c.new, 1)))
			if err != nil {
				t.Fatal(err)
			}
			probs := checkKnowledge(broken)
			if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Fatalf("no problem reported with %q; got %v", c.want, probs)
			}
		})
	}
}
