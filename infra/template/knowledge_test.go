package template_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// nextResource finds the line that starts the next resource of
// Resources.
var nextResource = regexp.MustCompile(`\n  [A-Za-z0-9]+:\n`)

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

// vectorQueryActions are the calls of a query alone: what the chat
// functions (a reply's retrieval, knowledge_search) make.
var vectorQueryActions = []string{"s3vectors:QueryVectors", "s3vectors:GetVectors"}

// vectorReaders are the functions that query the vectors without writing
// them: the chat functions, whose replies retrieve from the knowledge
// bases a chat names.
var vectorReaders = []string{"ChatsFunction", "StreamFunction"}

// TestKnowledgeVectorGrants: KnowledgeFunction reaches S3 Vectors with
// exactly the calls its index makes, the chat functions with a query's
// calls only, each on the one index of the stack's parameters; their
// environments name the same index.
func TestKnowledgeVectorGrants(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "s3vectors:") - strings.Count(text, ":s3vectors:"); n != len(vectorActions)+len(vectorReaders)*len(vectorQueryActions) {
		t.Errorf("template.yaml names s3vectors: %d times, want once per action of KnowledgeFunction's statement and of the chat functions' queries", n)
	}
	for _, id := range vectorReaders {
		start := strings.Index(text, "\n  "+id+":\n")
		if start < 0 {
			t.Fatalf("no %s", id)
		}
		// The function's block ends at the next resource (a line of two
		// spaces and a name).
		fn := text[start+1:]
		if loc := nextResource.FindStringIndex(fn); loc != nil {
			fn = fn[:loc[0]]
		}
		for _, want := range []string{
			"Action: [" + strings.Join(vectorQueryActions, ", ") + "]",
			`Resource: [!Sub "` + vectorIndexARN + `"]`,
			"KNOWLEDGE_VECTOR_BUCKET: !Ref KnowledgeVectorBucketName",
			"KNOWLEDGE_VECTOR_INDEX: !Ref KnowledgeVectorIndexName",
		} {
			if !strings.Contains(fn, want) {
				t.Errorf("%s lacks %s", id, want)
			}
		}
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
