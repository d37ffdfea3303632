package template_test

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/workflowchat/service/shared/blob"
)

// The blob store's bucket (shared/blob over S3) and the functions' access
// to it.

const (
	blobBucketID = "BlobBucket"
	blobEnv      = "BLOB_BUCKET"
)

// s3Actions are the only S3 actions a function policy may name: object
// reads (GetObject, which HeadObject and a copy's source need), writes
// (PutObject, also a copy's destination and what a presigned PUT the
// function signs may do), deletes (DeleteObject, per key of
// DeleteObjects), and ListBucket: for DeletePrefix, and for S3 to answer
// a missing key 404 rather than 403 (see wholeBucketList).
var s3Actions = map[string]bool{"s3:GetObject": true, "s3:PutObject": true, "s3:DeleteObject": true, "s3:ListBucket": true}

// wantBlobGrants is the reviewed contract of the functions' access to the
// bucket: per function, per key prefix (a blob.Kinds prefix), the object
// actions, and under "list" the prefixes it may list (wholeBucketList: all
// of them, with no prefix condition); each entry says what of the
// function's code uses it (docs/deploy.md, Blobs).
// A function not named here has no S3 statement and no BLOB_BUCKET
// (checkBlobGrants).
var wantBlobGrants = map[string]map[string][]string{
	// Attachments: the presigned upload into uploads/ (signed with this
	// role), the check (Get, Head), the copy to attachments/ (Get on the
	// source, Put on the copy), the upload's tombstone (Put); the
	// presigned download of attachments/; the copy's delete. The chat's
	// own values (chats/), its runs' (runs/, read and deleted with it);
	// tool values by reference (calls/).
	"ChatsFunction": {
		"uploads/":     {"s3:GetObject", "s3:PutObject"},
		"attachments/": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"chats/":       {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"runs/":        {"s3:GetObject", "s3:DeleteObject"},
		"calls/":       {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		// The chat's delete lists chats/ and runs/; a pending
		// attachment's missing upload, a deleted segment (404s).
		"list": {wholeBucketList},
		// The segments of the knowledge bases a chat names, read by its
		// replies' retrieval and knowledge_search.
		"knowledge/": {"s3:GetObject"},
	},
	// Streamed replies' and in-stream runs' values (a reply deletes the
	// keys it wrote when its chat was deleted while it was generating); a message's
	// attachments, checked first when pending (Get of the upload, Put of
	// its tombstone and of the checked copy, Delete of a copy made while
	// the attachment was being deleted).
	"StreamFunction": {
		"uploads/":     {"s3:GetObject", "s3:PutObject"},
		"attachments/": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"chats/":       {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"runs/":        {"s3:GetObject", "s3:PutObject"},
		"calls/":       {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		// As ChatsFunction's: the knowledge bases' segments, read.
		"knowledge/": {"s3:GetObject"},
		// A pending attachment's missing upload, a deleted segment (404s).
		"list": {wholeBucketList},
	},
	// Runs' values, deleted with their workflow; run inputs naming an
	// attachment.
	"WorkflowsFunction": {
		"uploads/":     {"s3:GetObject", "s3:PutObject"},
		"attachments/": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"runs/":        {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		// The workflow's delete lists runs/; a pending attachment's
		// missing upload (404).
		"list": {wholeBucketList},
	},
	// Steps' values; tool inputs and results passed by reference.
	"RunnerFunction": {
		"uploads/":     {"s3:GetObject", "s3:PutObject"},
		"attachments/": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"runs/":        {"s3:GetObject", "s3:PutObject"},
		"calls/":       {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		// knowledge_search in steps: the knowledge bases' segments, read.
		"knowledge/": {"s3:GetObject"},
		// A pending attachment's missing upload, a deleted segment, a
		// human step's lost request (404s).
		"list": {wholeBucketList},
	},
	// The functions that start runs through the one run service
	// (runstart.Build) but read no run values: a large input or plan
	// (runs/, written), the attachments an input names, checked first
	// when pending (Get of the upload, Put of its tombstone and of the
	// checked copy, Delete of a copy made while the attachment was being
	// deleted). The sweeper's is the buffered fire an interrupted
	// schedule run's end may start.
	"TriggersFunction":    triggeredRunGrants,
	"TriggerFireFunction": triggeredRunGrants,
	// ... and the sweeper's account erasure deletes the user's chats and
	// workflows with their values and attachments, and what is left in
	// the user's upload and attachment folders.
	"SweeperFunction": {
		"uploads/":     {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"attachments/": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"runs/":        {"s3:PutObject", "s3:DeleteObject"},
		"chats/":       {"s3:DeleteObject"},
		// The erasure lists the user's folders; a pending attachment's
		// missing upload, an attachment deleted while it is exported
		// (404s).
		"list": {wholeBucketList},
		// ... and it writes the data exports (their zips read from the
		// stores and the attachments above) and erases them with the
		// account.
		"exports/": {"s3:PutObject", "s3:DeleteObject"},
		// ... and an erased account's knowledge bases lose their
		// documents' segments.
		"knowledge/": {"s3:DeleteObject"},
	},
	// A completed export's presigned download.
	"AuthFunction": {
		"exports/": {"s3:GetObject"},
	},
	// A call's large input (spilled into the run), a run's large output
	// read back for the client; the attachments its arguments name, as
	// above.
	"McpGatewayFunction": {
		"uploads/":     {"s3:GetObject", "s3:PutObject"},
		"attachments/": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"runs/":        {"s3:GetObject", "s3:PutObject"},
		"list":         {wholeBucketList},
	},
	// The attachments documents are made from (checked first when
	// pending, as above); documents' segments, read by queries and
	// deleted with their document (KnowledgeIndexFunction writes them).
	"KnowledgeFunction": {
		"uploads/":     {"s3:GetObject", "s3:PutObject"},
		"attachments/": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"knowledge/":   {"s3:GetObject", "s3:DeleteObject"},
		// A pending attachment's missing upload, a deleted segment (404s).
		"list": {wholeBucketList},
	},
	// The attachment a document is indexed from (checked first when
	// pending, as above); its segment, written, and deleted when the
	// attempt fails or the document is gone.
	"KnowledgeIndexFunction": {
		"uploads/":     {"s3:GetObject", "s3:PutObject"},
		"attachments/": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
		"knowledge/":   {"s3:PutObject", "s3:DeleteObject"},
		"list":         {wholeBucketList},
	},
	// Tool inputs passed by reference, results too large for a
	// response; an inputRef naming no stored input is INVALID_PARAMS
	// (404).
	"McpFunction": {
		"calls/": {"s3:GetObject", "s3:PutObject"},
		"list":   {wholeBucketList},
	},
}

// wholeBucketList, under "list", is s3:ListBucket on the bucket with no
// condition. S3 answers a GetObject or HeadObject of a missing key 404
// only to a caller allowed s3:ListBucket on the bucket, and 403
// AccessDenied to any other; an s3:prefix condition does not count (the
// object request has no prefix), nor could any condition tell that check
// from a listing. s3blob maps only 404 to NotFound, which the code below
// relies on; so a function whose code reads a key that may be missing
// needs it (missingKeyReaders).
const wholeBucketList = "*"

// missingKeyReaders are the code that reads or stats blob keys that may
// be missing and takes NotFound for an answer, each by the call in a
// function's main or builder package (codeFacts.mains) that builds it:
// a function whose code has one needs wholeBucketList, and one with
// wholeBucketList has one.
var missingKeyReaders = []struct{ call, why string }{
	{"blobstore.Attachments(", "attachment.Service: settle reads a pending attachment's upload (missing: still pending, or failed past its deadline), Open the copy (missing: deleted)"},
	{"runstart.Build(", "the run service: a run input's attachment checked and read (attachment.Service, as above), a spilled value lost (a human step's request times out)"},
	{"knowledgecore.Service(", "knowledge.Service: a document's attachment (as above), a segment deleted meanwhile (skipped)"},
	{"knowledgefn.Service(", "knowledge.Service, as above"},
	{"knowledgefn.NewLazy(", "knowledge.Service for knowledge_search, as above"},
	{"toolserver.WithBlobs(", "the tool server: an inputRef naming no stored input (INVALID_PARAMS)"},
	{"copyBlob(", "the data export: an attachment deleted meanwhile is left out"},
}

// triggeredRunGrants are the blob grants of the functions that start
// runs but read none of their values.
var triggeredRunGrants = map[string][]string{
	"uploads/":     {"s3:GetObject", "s3:PutObject"},
	"attachments/": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
	"runs/":        {"s3:PutObject"},
	// A pending attachment's missing upload (404).
	"list": {wholeBucketList},
}

// blobGrants reads the S3 statements of function id's inline policies:
// prefix -> actions (and "list" -> listed prefixes), with what breaks
// the rules of check (o).
func blobGrants(s *stack, id string) (map[string]map[string]bool, []string) {
	var probs []string
	out := map[string]map[string]bool{}
	add := func(k, v string) {
		if out[k] == nil {
			out[k] = map[string]bool{}
		}
		out[k][v] = true
	}
	bucketARN := getAttMark + blobBucketID + ".Arn"
	docs, _ := asMap(s.resources()[id]["Properties"])["Policies"].([]any)
	for i, d := range docs {
		stmts, _ := asMap(d)["Statement"].([]any)
		for j, st := range stmts {
			stmt := asMap(st)
			actions := strs(stmt["Action"])
			if countS3(actions) == 0 {
				continue
			}
			where := fmt.Sprintf("%s: Policies[%d].Statement[%d]", id, i, j)
			if stmt["Effect"] != "Allow" {
				probs = append(probs, where+": S3 statements allow")
			}
			for _, a := range actions {
				if !s3Actions[a] {
					probs = append(probs, fmt.Sprintf("%s: action %q is not in the S3 allow-list (no wildcards)", where, a))
				}
			}
			for _, k := range []string{"NotAction", "NotResource", "Principal", "NotPrincipal"} {
				if _, ok := stmt[k]; ok {
					probs = append(probs, fmt.Sprintf("%s: %s is not allowed", where, k))
				}
			}
			for _, r := range strs(stmt["Resource"]) {
				if r == bucketARN {
					if !slices.Equal(actions, []string{"s3:ListBucket"}) {
						probs = append(probs, fmt.Sprintf("%s: the bucket itself with %v; only s3:ListBucket, alone", where, actions))
						continue
					}
					cond := asMap(stmt["Condition"])
					if len(cond) == 0 {
						add("list", wholeBucketList)
						continue
					}
					prefixes := strs(asMap(cond["StringLike"])["s3:prefix"])
					if len(cond) != 1 || len(asMap(cond["StringLike"])) != 1 || len(prefixes) == 0 {
						probs = append(probs, where+": s3:ListBucket under a condition other than StringLike s3:prefix")
						continue
					}
					for _, p := range prefixes {
						kind, ok := strings.CutSuffix(p, "*")
						if !ok || !isKindPrefix(kind) {
							probs = append(probs, fmt.Sprintf("%s: s3:prefix %q, want <kind>/* of blob.Kinds", where, p))
							continue
						}
						add("list", kind)
					}
					continue
				}
				rest, ok := strings.CutPrefix(r, subMark+"${"+blobBucketID+".Arn}/")
				kind, star := strings.CutSuffix(rest, "*")
				if !ok || !star || !isKindPrefix(kind) {
					probs = append(probs, fmt.Sprintf("%s: resource %q, want !Sub \"${%s.Arn}/<kind>/*\" of a blob.Kinds prefix (or the bucket, for ListBucket)", where, r, blobBucketID))
					continue
				}
				for _, a := range actions {
					if a == "s3:ListBucket" {
						probs = append(probs, fmt.Sprintf("%s: s3:ListBucket on objects; it applies to the bucket", where))
						continue
					}
					add(kind, a)
				}
			}
		}
	}
	return out, probs
}

func countS3(actions []string) int {
	n := 0
	for _, a := range actions {
		if strings.HasPrefix(a, "s3:") {
			n++
		}
	}
	return n
}

func isKindPrefix(p string) bool {
	return slices.ContainsFunc(blob.Kinds, func(k blob.Kind) bool { return k.Prefix == p })
}

// (o) Each function's access to the blob bucket: only the allowed S3
// actions, only on blob.Kinds prefixes of BlobBucket (ListBucket on the
// bucket, under a prefix condition or none), exactly the reviewed
// wantBlobGrants; ListBucket with no condition exactly for the functions
// whose code reads keys that may be missing (missingKeyReaders), so that
// S3 answers them 404; a function has access exactly when it receives
// BLOB_BUCKET = !Ref BlobBucket, per function (not in Globals), and a
// function whose code requires BLOB_BUCKET receives it.
func checkBlobGrants(s *stack, f *codeFacts) []string {
	var probs []string
	if s.globalFn != nil && s.globalFn.Environment != nil {
		if _, ok := s.globalFn.Environment.Variables[blobEnv]; ok {
			probs = append(probs, "Globals.Function.Environment "+blobEnv+": per function, only where the bucket is used")
		}
	}
	for _, id := range sortedKeys(s.functions) {
		got, p := blobGrants(s, id)
		probs = append(probs, p...)
		gotBy := map[string][]string{}
		for k, set := range got {
			for a := range set {
				gotBy[k] = append(gotBy[k], a)
			}
			sort.Strings(gotBy[k])
		}
		want := wantBlobGrants[id]
		for _, k := range sortedKeys(want) {
			if w := slices.Sorted(slices.Values(want[k])); !slices.Equal(gotBy[k], w) {
				probs = append(probs, fmt.Sprintf("%s on blobs %s: grants %v, want %v", id, k, gotBy[k], w))
			}
		}
		for _, k := range sortedKeys(gotBy) {
			if _, ok := want[k]; !ok {
				probs = append(probs, fmt.Sprintf("%s on blobs %s: grants %v, want none", id, k, gotBy[k]))
			}
		}
		env, has := s.env(s.functions[id])[blobEnv]
		switch {
		case len(got) > 0 && env != refMark+blobBucketID:
			probs = append(probs, fmt.Sprintf("%s: may access the blob bucket but %s is %q, want !Ref %s", id, blobEnv, env, blobBucketID))
		case len(got) == 0 && has:
			probs = append(probs, fmt.Sprintf("%s: receives %s but has no access to the bucket", id, blobEnv))
		}
		dir := strings.ToLower(strings.TrimSuffix(id, "Function"))
		if strings.Contains(f.mains[dir], `"`+blobEnv+`"`) && !has {
			probs = append(probs, fmt.Sprintf("%s: functions/%s requires %s but does not receive it", id, dir, blobEnv))
		}
		var reads []string
		for _, r := range missingKeyReaders {
			if strings.Contains(f.mains[dir], r.call) {
				reads = append(reads, r.call+")")
			}
		}
		whole := got["list"][wholeBucketList]
		switch {
		case len(reads) > 0 && !whole:
			probs = append(probs, fmt.Sprintf("%s: functions/%s reads blob keys that may be missing (%s) but has no s3:ListBucket on %s without a condition: S3 would answer a missing key 403, not 404 (NotFound)",
				id, dir, strings.Join(reads, ", "), blobBucketID))
		case whole && len(reads) == 0:
			probs = append(probs, fmt.Sprintf("%s: s3:ListBucket on the whole of %s, but functions/%s reads no blob key that may be missing (missingKeyReaders)", id, blobBucketID, dir))
		}
	}
	for _, id := range sortedKeys(wantBlobGrants) {
		if s.functions[id] == nil {
			probs = append(probs, fmt.Sprintf("wantBlobGrants: %s is not a function of the template", id))
		}
	}
	return probs
}

// (n) The bucket: encrypted at rest by default, every public access
// blocked, ACLs disabled, not versioned (a delete deletes), retained like
// the tables; its lifecycle expires exactly the blob.Kinds that expire,
// after their days, and aborts incomplete multipart uploads; CORS lets the
// AllowedOrigins PUT and GET (the presigned URLs of browsers); its policy
// refuses plain HTTP and signatures older than blob.MaxTTL; its name is
// an output.
func checkBlobBucket(s *stack, _ *codeFacts) []string {
	var probs []string
	res := s.resources()
	b := res[blobBucketID]
	if b["Type"] != "AWS::S3::Bucket" {
		return []string{blobBucketID + ": no AWS::S3::Bucket (the blob store)"}
	}
	add := func(format string, args ...any) {
		probs = append(probs, blobBucketID+": "+fmt.Sprintf(format, args...))
	}
	if b["DeletionPolicy"] != "Retain" || b["UpdateReplacePolicy"] != "Retain" {
		add("DeletionPolicy %v / UpdateReplacePolicy %v, want Retain / Retain", b["DeletionPolicy"], b["UpdateReplacePolicy"])
	}
	props := asMap(b["Properties"])
	if _, ok := props["BucketName"]; ok {
		add("BucketName set; let CloudFormation name it (functions get it by !Ref)")
	}

	rules, _ := asMap(props["BucketEncryption"])["ServerSideEncryptionConfiguration"].([]any)
	encrypted := false
	for _, r := range rules {
		alg := asMap(asMap(r)["ServerSideEncryptionByDefault"])["SSEAlgorithm"]
		encrypted = encrypted || alg == "AES256" || alg == "aws:kms" || alg == "aws:kms:dsse"
	}
	if !encrypted {
		add("no default encryption (BucketEncryption SSEAlgorithm AES256 or aws:kms)")
	}
	pab := asMap(props["PublicAccessBlockConfiguration"])
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if pab[k] != true {
			add("PublicAccessBlockConfiguration.%s is not true", k)
		}
	}
	own, _ := asMap(props["OwnershipControls"])["Rules"].([]any)
	if len(own) != 1 || asMap(own[0])["ObjectOwnership"] != "BucketOwnerEnforced" {
		add("OwnershipControls: want ObjectOwnership BucketOwnerEnforced (ACLs disabled)")
	}
	if v := asMap(props["VersioningConfiguration"]); v != nil && v["Status"] == "Enabled" {
		add("versioning enabled: deleted blobs (a deleted chat's attachments) would live on as old versions")
	}

	// Lifecycle, against blob.Kinds.
	expires := map[string]float64{}
	abort := false
	lc, _ := asMap(props["LifecycleConfiguration"])["Rules"].([]any)
	for _, r := range lc {
		rule := asMap(r)
		if rule["Status"] != "Enabled" {
			continue
		}
		if a := asMap(rule["AbortIncompleteMultipartUpload"]); a != nil {
			if d, _ := a["DaysAfterInitiation"].(float64); d >= 1 && d <= 7 {
				abort = true
			}
		}
		if d, ok := rule["ExpirationInDays"].(float64); ok {
			prefix, _ := rule["Prefix"].(string)
			if p, ok := asMap(rule["Filter"])["Prefix"].(string); ok {
				prefix = p
			}
			if prefix == "" {
				add("lifecycle rule %v expires the whole bucket", rule["Id"])
				continue
			}
			expires[prefix] = d
		}
	}
	for _, k := range blob.Kinds {
		got, ok := expires[k.Prefix]
		switch {
		case k.ExpiresDays == 0 && ok:
			add("lifecycle expires %s after %v days; blob.Kinds keeps it until deleted", k.Prefix, got)
		case k.ExpiresDays > 0 && got != float64(k.ExpiresDays):
			add("lifecycle of %s: %v days, want %d (blob.Kinds)", k.Prefix, got, k.ExpiresDays)
		}
		delete(expires, k.Prefix)
	}
	for _, p := range sortedKeys(expires) {
		add("lifecycle expires %s, which is no kind of blob.Kinds", p)
	}
	if !abort {
		add("no enabled lifecycle rule aborts incomplete multipart uploads (AbortIncompleteMultipartUpload, 1-7 days)")
	}

	// CORS for the browsers' presigned PUTs and GETs.
	cors, _ := asMap(props["CorsConfiguration"])["CorsRules"].([]any)
	corsOK := false
	for _, r := range cors {
		rule := asMap(r)
		methods, headers := strs(rule["AllowedMethods"]), strings.ToLower(strings.Join(strs(rule["AllowedHeaders"]), ","))
		if slices.Equal(strs(rule["AllowedOrigins"]), []string{refMark + "AllowedOrigins"}) &&
			slices.Contains(methods, "PUT") && slices.Contains(methods, "GET") && strings.Contains(headers, "content-type") &&
			strings.Contains(headers, "if-none-match") &&
			!slices.Contains(strs(rule["AllowedOrigins"]), "*") {
			corsOK = true
		}
	}
	if !corsOK {
		add("CorsConfiguration: want a rule for !Split [\",\", !Ref AllowedOrigins] allowing PUT and GET with the headers of a presigned upload (content-type, if-none-match)")
	}

	// The bucket policy.
	tls, age := false, false
	for _, r := range res {
		if r["Type"] != "AWS::S3::BucketPolicy" {
			continue
		}
		p := asMap(r["Properties"])
		if p["Bucket"] != refMark+blobBucketID {
			continue
		}
		stmts, _ := asMap(p["PolicyDocument"])["Statement"].([]any)
		for _, st := range stmts {
			stmt := asMap(st)
			resources := strs(stmt["Resource"])
			whole := slices.Contains(resources, getAttMark+blobBucketID+".Arn") && slices.Contains(resources, subMark+"${"+blobBucketID+".Arn}/*")
			if stmt["Effect"] != "Deny" || stmt["Principal"] != "*" || !slices.Contains(strs(stmt["Action"]), "s3:*") || !whole {
				continue
			}
			cond := asMap(stmt["Condition"])
			if fmt.Sprint(asMap(cond["Bool"])["aws:SecureTransport"]) == "false" {
				tls = true
			}
			if v, ok := asMap(cond["NumericGreaterThan"])["s3:signatureAge"]; ok {
				ms, _ := strconv.ParseFloat(fmt.Sprint(v), 64)
				age = ms > 0 && ms <= float64(blob.MaxTTL.Milliseconds())
			}
		}
	}
	if !tls {
		add("no bucket policy denying s3:* on the bucket and its objects when aws:SecureTransport is false")
	}
	if !age {
		add("no bucket policy denying s3:* for an s3:signatureAge over blob.MaxTTL (%d ms)", blob.MaxTTL.Milliseconds())
	}
	if o, ok := s.tmpl.Outputs["BlobBucketName"]; !ok || fmt.Sprint(o.Value) != refMark+blobBucketID {
		probs = append(probs, "Outputs: no BlobBucketName = !Ref "+blobBucketID)
	}
	return probs
}

// blobsListStmt is a function's s3:ListBucket on the whole bucket.
const blobsListStmt = "            - Sid: BlobsList\n              Effect: Allow\n              Action: [s3:ListBucket]\n              Resource: [!GetAtt BlobBucket.Arn]\n"

// blobCases break the bucket and the grants.
var blobCases = []brokenCase{
	{"bucket not encrypted", "n_blob_bucket",
		"      BucketEncryption:\n        ServerSideEncryptionConfiguration:\n          - ServerSideEncryptionByDefault:\n              SSEAlgorithm: AES256\n", "", "no default encryption"},
	{"public policies allowed", "n_blob_bucket", "        BlockPublicPolicy: true", "        BlockPublicPolicy: false", "BlockPublicPolicy is not true"},
	{"uploads never expire", "n_blob_bucket",
		"          - Id: ExpireUploads\n            Status: Enabled\n            Prefix: uploads/\n            ExpirationInDays: 1\n", "", "lifecycle of uploads/: 0 days, want 1"},
	{"attachments expire", "n_blob_bucket", "            Prefix: uploads/\n", "            Prefix: attachments/\n", "lifecycle expires attachments/"},
	{"tool values in transit kept a week", "n_blob_bucket", "            Prefix: calls/\n            ExpirationInDays: 1", "            Prefix: calls/\n            ExpirationInDays: 7", "lifecycle of calls/: 7 days, want 1"},
	{"multipart uploads kept", "n_blob_bucket", "              DaysAfterInitiation: 1", "              DaysAfterInitiation: 30", "aborts incomplete multipart uploads"},
	{"versioned", "n_blob_bucket", "      OwnershipControls:\n", "      VersioningConfiguration:\n        Status: Enabled\n      OwnershipControls:\n", "versioning enabled"},
	{"plain HTTP allowed", "n_blob_bucket", `                aws:SecureTransport: "false"`, `                aws:SecureTransport: "true"`, "aws:SecureTransport is false"},
	{"day-long URLs", "n_blob_bucket", "                s3:signatureAge: 3600000", "                s3:signatureAge: 86400000", "s3:signatureAge over blob.MaxTTL"},
	{"CORS for every origin", "n_blob_bucket", "            - AllowedOrigins: !Split [\",\", !Ref AllowedOrigins]\n              AllowedMethods: [GET, PUT, HEAD]",
		"            - AllowedOrigins: [\"*\"]\n              AllowedMethods: [GET, PUT, HEAD]", "CorsConfiguration"},
	{"CORS without the create-only header", "n_blob_bucket", "AllowedHeaders: [content-type, if-none-match]", "AllowedHeaders: [content-type]", "CorsConfiguration"},
	{"bucket name not an output", "n_blob_bucket", "  BlobBucketName:\n", "  BlobName:\n", "no BlobBucketName"},
	{"the whole bucket granted", "o_blob_grants", `                - !Sub "${BlobBucket.Arn}/runs/*"` + "\n            # ListBucket on the bucket, with no s3:prefix condition: a\n            # chat's",
		`                - !Sub "${BlobBucket.Arn}/*"` + "\n            # ListBucket on the bucket, with no s3:prefix condition: a\n            # chat's", `want !Sub "${BlobBucket.Arn}/<kind>/*"`},
	{"a wildcard action", "o_blob_grants", "Action: [s3:GetObject, s3:DeleteObject]", "Action: [\"s3:*\"]", `"s3:*" is not in the S3 allow-list`},
	{"the tool server loses ListBucket", "o_blob_grants", blobsListStmt, "", "McpFunction: functions/mcp reads blob keys that may be missing (toolserver.WithBlobs()"},
	{"the stream's ListBucket under a prefix (a missing upload reads 403)", "o_blob_grants",
		"# a segment deleted meanwhile instead of being skipped.\n" + blobsListStmt,
		"# a segment deleted meanwhile instead of being skipped.\n" + blobsListStmt + "              Condition:\n                StringLike:\n                  s3:prefix: [chats/*]\n",
		"StreamFunction: functions/stream reads blob keys that may be missing (blobstore.Attachments(), runstart.Build()) but has no s3:ListBucket"},
	{"the trigger fires lose ListBucket", "o_blob_grants", "            # past its deadline).\n" + blobsListStmt, "            # past its deadline).\n",
		"TriggerFireFunction on blobs list: grants [], want [*]"},
	{"the whole bucket listed by a function that reads no missing key", "o_blob_grants",
		`                - !Sub "${BlobBucket.Arn}/exports/*"` + "\n",
		`                - !Sub "${BlobBucket.Arn}/exports/*"` + "\n" + blobsListStmt,
		"AuthFunction: s3:ListBucket on the whole of BlobBucket, but functions/auth reads no blob key that may be missing"},
	{"ListBucket under another condition", "o_blob_grants", blobsListStmt, blobsListStmt + "              Condition:\n                StringEquals:\n                  aws:SourceVpc: vpc-1\n",
		"s3:ListBucket under a condition other than StringLike s3:prefix"},
	{"another bucket", "o_blob_grants", `                - !Sub "${BlobBucket.Arn}/uploads/*"`, `                - "arn:aws:s3:::other-bucket/*"`, "resource \"arn:aws:s3:::other-bucket/*\""},
	{"more than reviewed", "o_blob_grants", "Action: [s3:GetObject, s3:DeleteObject]", "Action: [s3:GetObject, s3:PutObject, s3:DeleteObject]", "ChatsFunction on blobs runs/"},
	{"chats without the bucket's name", "o_blob_grants",
		"          # The blob store (shared/blob over S3; docs/deploy.md, Blobs).\n          BLOB_BUCKET: !Ref BlobBucket\n          # Each user's", "          # Each user's",
		"ChatsFunction: may access the blob bucket but BLOB_BUCKET"},
	{"the sweeper granted more blobs", "o_blob_grants", "              Action: [s3:PutObject]\n              Resource:\n                - !Sub \"${BlobBucket.Arn}/runs/*\"\n        # Tracing",
		"              Action: [s3:PutObject, s3:GetObject]\n              Resource:\n                - !Sub \"${BlobBucket.Arn}/runs/*\"\n        # Tracing",
		"SweeperFunction on blobs runs/: grants [s3:DeleteObject s3:GetObject s3:PutObject], want [s3:DeleteObject s3:PutObject]"},
	{"the triggers without the bucket's name", "o_blob_grants",
		"          RUNNER_FUNCTION: !Ref RunnerFunction\n          # The blob store (shared/blob over S3; docs/deploy.md, Blobs).\n          BLOB_BUCKET: !Ref BlobBucket\n      Policies:\n        - Version: \"2012-10-17\"\n          Statement:\n            # The auth middleware",
		"          RUNNER_FUNCTION: !Ref RunnerFunction\n      Policies:\n        - Version: \"2012-10-17\"\n          Statement:\n            # The auth middleware",
		"TriggersFunction: may access the blob bucket but BLOB_BUCKET"},
	{"bucket name in Globals", "o_blob_grants", "        LOG_FORMAT: json\n", "        LOG_FORMAT: json\n        BLOB_BUCKET: !Ref BlobBucket\n", "Globals.Function.Environment BLOB_BUCKET"},
	{"S3 mixed into a DynamoDB statement", "d_iam_least_privilege", "Action: [dynamodb:Query]\n              Resource: [!Sub \"${DataTable.Arn}/index/GSI1\"]",
		"Action: [dynamodb:Query, s3:GetObject]\n              Resource: [!Sub \"${DataTable.Arn}/index/GSI1\"]", "mixes s3: and other actions"},
}
