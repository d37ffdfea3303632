package template_test

import (
	"os"
	"strings"
	"testing"
)

// vectorActions are the S3 Vectors calls of shared/knowledge/s3vectorindex
// (a query with a metadata filter needs GetVectors too).
var vectorActions = []string{"s3vectors:PutVectors", "s3vectors:QueryVectors", "s3vectors:GetVectors", "s3vectors:DeleteVectors"}

// vectorIndexARN is the one index the grants may name: the stack's
// parameters' bucket and index.
const vectorIndexARN = "arn:${AWS::Partition}:s3vectors:${AWS::Region}:${AWS::AccountId}:bucket/${KnowledgeVectorBucketName}/index/${KnowledgeVectorIndexName}"

func isVectorsStatement(stmt map[string]any) bool {
	for _, a := range strs(stmt["Action"]) {
		if strings.HasPrefix(a, "s3vectors:") {
			return true
		}
	}
	return false
}

// TestKnowledgeVectorGrants: only KnowledgeFunction reaches S3 Vectors,
// with exactly the calls its index makes, on the one index of the
// stack's parameters; its environment names the same index.
func TestKnowledgeVectorGrants(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "s3vectors:") - strings.Count(text, ":s3vectors:"); n != len(vectorActions) {
		t.Errorf("template.yaml names s3vectors: %d times, want once per action of KnowledgeFunction's statement", n)
	}
	start := strings.Index(text, "\n  KnowledgeFunction:\n")
	end := strings.Index(text[start+1:], "\n  KnowledgeFunctionThrottlesAlarm:")
	if start < 0 || end < 0 {
		t.Fatal("no KnowledgeFunction")
	}
	fn := text[start : start+1+end]
	for _, want := range []string{
		"Action: [" + strings.Join(vectorActions, ", ") + "]",
		`Resource: [!Sub "` + vectorIndexARN + `"]`,
		"KNOWLEDGE_VECTOR_BUCKET: !Ref KnowledgeVectorBucketName",
		"KNOWLEDGE_VECTOR_INDEX: !Ref KnowledgeVectorIndexName",
	} {
		if !strings.Contains(fn, want) {
			t.Errorf("KnowledgeFunction lacks %s", want)
		}
	}
}
