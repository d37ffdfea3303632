// Package template_test checks template.yaml, the SAM stack, against the Go
// code it deploys: the function folders, the routes each function's router
// registers, the table definitions in shared/store, and the least-privilege
// IAM each function needs.
//
// The template is read three times through goformation's intrinsic
// processor: typed (goformation's cloudformation.Template) for functions,
// events, tables and globals, and as a generic JSON tree
// (intrinsics.ProcessYAML) for the parts goformation's union types
// represent lossily (inline IAM policies, CORS, outputs, resource types),
// both with conditions evaluated; and once more as a structural tree in
// which conditions and the other intrinsics (Fn::If, Fn::Select, Fn::Split,
// ...) are kept as {"Fn::If": [...]} objects, for what depends on them
// (the CloudFront origins, the Bedrock condition). Ref, Fn::GetAtt and
// Fn::Sub are kept as marker strings ("Ref:UsersTable",
// "GetAtt:UsersTable.Arn", "Sub:${DataTable.Arn}/index/GSI1") instead of
// being resolved to nothing.
//
// edge_test.go holds the checks of the Lambda edge: streaming function
// URLs, the CloudFront distribution and the model providers.
//
// TestTemplate runs every check on template.yaml; TestChecksCatchBrokenTemplates
// proves each check fails on a template broken the way it guards against,
// and TestChecksCatchCodeDrift that the checks which read the code fail
// when the code moves away from the template.
package template_test

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	"github.com/awslabs/goformation/v7/cloudformation/global"
	"github.com/awslabs/goformation/v7/cloudformation/serverless"
	"github.com/awslabs/goformation/v7/intrinsics"

	"github.com/workflowchat/service/functions/assembly/mcpfn"
	"github.com/workflowchat/service/infra/local"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/store"
)

const (
	root         = "../.."
	templateFile = root + "/template.yaml"

	httpAPIID = "HttpApi" // the one AWS::Serverless::HttpApi every route hangs off

	refMark    = "Ref:"
	getAttMark = "GetAtt:"
	subMark    = "Sub:"
)

// allowedActions are the only IAM actions a function policy may name: item
// and query operations of DynamoDB. No wildcards, no Scan (no Scan on
// any request path), no table administration. Add a non-DynamoDB
// action (e.g. bedrock:InvokeModelWithResponseStream) here only together
// with the code that needs it.
var allowedActions = map[string]bool{
	"dynamodb:GetItem":            true,
	"dynamodb:PutItem":            true,
	"dynamodb:UpdateItem":         true,
	"dynamodb:DeleteItem":         true,
	"dynamodb:ConditionCheckItem": true, // condition-check items of TransactWriteItems
	"dynamodb:Query":              true,
	"dynamodb:BatchGetItem":       true,
	"dynamodb:BatchWriteItem":     true,
}

// wantGrants is the reviewed IAM contract: per function, per table, exactly
// the DynamoDB actions its code performs (read from shared/store and the
// packages each function's main wires). A transaction needs the per-item
// actions (PutItem, UpdateItem, DeleteItem, ConditionCheckItem); there is no
// IAM action for TransactWriteItems itself. Update it together with the
// store code and template.yaml.
var wantGrants = map[string]map[string][]string{
	"HealthFunction": {},
	"McpServersFunction": {
		// the auth middleware.
		"SessionsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// store.MCPServers: Server (GetItem, and of the owner item);
		// ListServers (Query of the user's partition); CreateServer and
		// DeleteServer (tx of Put/Delete and the count's Update);
		// UpdateServer (conditional PutItem, or a tx moving the name).
		"DataTable": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query"},
		// RATE_LIMIT_MCP_SERVERS: store.RateLimits.Hit, one UpdateItem.
		"RateLimitsTable": {"dynamodb:UpdateItem"},
	},
	"AuthFunction": {
		// sign-up transaction: Put credential + Put profile; sign-in:
		// GetItem; account deletion's transaction (store.BeginDeletion):
		// Delete credential, Update profile, Put the erasure request.
		"UsersTable": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem"},
		// the audit log (store.Audit: PutItem, Query of AUDIT#), the
		// erasure request (PutItem of DELETION#) and the data exports
		// (store.Exports: the request's transaction of Puts, its state a
		// consistent GetItem of EXPORT#).
		"DataTable": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"},
		// create (also in the sign-up transaction), read, renew, sign out.
		"SessionsTable": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"},
		// sign-out-all: the user's session keys (store.DeleteUserSessions).
		"SessionsTable/index/UserSessions": {"dynamodb:Query"},
		// the credential limits: store.RateLimits.Hit, one UpdateItem (ADD)
		// per window of each rule, before any password is hashed.
		"RateLimitsTable": {"dynamodb:UpdateItem"},
		// sign-out-all also ends OAuth (oauth.RevokeUser): the user's
		// grants and tokens from the UserItems index, RevokeGrant
		// (UpdateItem), DeletePersonalToken (DeleteItem, and the user's
		// token count: GetItem, PutItem when it is missing).
		"OAuthTable":                 {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"},
		"OAuthTable/index/UserItems": {"dynamodb:Query"},
	},
	"OAuthFunction": {
		// the sign-in page: store.Users.Credential (GetItem).
		"UsersTable": {"dynamodb:GetItem"},
		// the audit log (store.Audit.AppendAudit).
		"DataTable": {"dynamodb:PutItem"},
		// the sign-in page's session (PutItem); the pages' and the
		// /api/users routes' session check and renewal.
		"SessionsTable": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
		// sign-in, token and registration limits (store.RateLimits.Hit).
		"RateLimitsTable": {"dynamodb:UpdateItem"},
		// store.OAuth: Client, Grant, RefreshToken, PersonalToken
		// (GetItem); CreateClient, CreateCode, CreatePersonalToken and
		// CreateGrant's transaction (PutItem); ConsumeCode and
		// DeletePersonalToken (DeleteItem); RotateRefreshToken's
		// transaction (UpdateItem, PutItem) and RevokeGrant (UpdateItem);
		// CodeEpoch (BatchGetItem) and CreateGrant's checks of the
		// epochs (ConditionCheckItem).
		"OAuthTable": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchGetItem", "dynamodb:ConditionCheckItem"},
		// UserGrants and UserPersonalTokens.
		"OAuthTable/index/UserItems": {"dynamodb:Query"},
	},
	// The MCP gateway: bearer.Verifier reads a grant or a personal access
	// token (GetItem). A tools/call is a durable run (mcpgateway.Engine):
	// ExposedTools (Query), ExposedTool, the workflow and the run
	// (GetItem), store.Runs.CreateRun (tx of Puts), the run's log (Query,
	// GetItem); the run rate limit (UpdateItem).
	"McpGatewayFunction": {
		"OAuthTable": {"dynamodb:GetItem"},
		// ... and an attachment a call's arguments name: the read
		// (TransactGetItems), MarkReady / MarkFailed (a tx of Updates
		// with a ConditionCheck), its chat (a Query of GSI1).
		"DataTable":            {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem", "dynamodb:Query"},
		"DataTable/index/GSI1": {"dynamodb:Query"},
		"RateLimitsTable":      {"dynamodb:UpdateItem"},
	},
	"ModelsFunction": {
		// SetModelPreference: conditional UpdateItem; the usage report:
		// store.Usage.MonthUsage (GetItem).
		"UsersTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// the auth middleware: Session (GetItem), RenewSession (UpdateItem).
		"SessionsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
	},
	"ToolsFunction": {
		// tool permissions: store.ToolPolicies (GetItem, UpdateItem).
		"UsersTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// the auth middleware; the catalog comes from the tool server.
		"SessionsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// the audit log (a policy changed: store.Audit.AppendAudit); the
		// user's remote MCP servers listed with the catalog
		// (store.MCPServers.ListServers: Query).
		"DataTable": {"dynamodb:PutItem", "dynamodb:Query"},
	},
	// The tool server has no storage.
	"McpFunction": {},
	"ChatsFunction": {
		// Send without modelId: store.Users.ModelPreference (GetItem); the
		// tool gate's policies (GetItem); each model call's reservation and
		// settle: store.Usage.Reserve and Settle (UpdateItem ADD).
		"UsersTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// the auth middleware.
		"SessionsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// store.Chats: Chat (GetItem); Conversation and deleteCollection's
		// key listing (Query); CreateChat (tx: Put chat + Update counter),
		// AddMessages (tx: Put messages + Update chat), DeleteChat (mark:
		// UpdateItem; tx: Delete chat + Update counter); UpdateChat (UpdateItem); deleteCollection's batches
		// (BatchWriteItem). Create with a workflowId: CheckWorkflow reads
		// the workflow (store.Workflows.Workflow: GetItem). No chat route
		// runs a workflow. DeleteChat deletes the chat's runs (each run's
		// collection: Query, BatchWriteItem, DeleteItem).
		// store.Attachments: CreateAttachment (tx: ConditionCheck on the
		// chat, Put attachment, Update storage counter), reads
		// (TransactGetItems: GetItem), MarkReady / MarkFailed (tx: Update
		// attachment, ConditionCheck on the chat, Update counter),
		// BeginDelete (UpdateItem), DeleteAttachments (tx: Delete, Update
		// counter), ChatAttachments (Query).
		// store.SearchIndex: the index caught up before a search (GetItem,
		// Query, BatchWriteItem, tx: Put, Update, ConditionCheck), a search's reads (GetItem,
		// Query, BatchGetItem of the page's chats and messages), a chat's
		// removal (Query, BatchWriteItem, tx: Delete, Update; DeleteItem).
		"DataTable": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem",
			"dynamodb:Query", "dynamodb:BatchWriteItem", "dynamodb:BatchGetItem"},
		// ListChats: one Query of GSI1.
		"DataTable/index/GSI1": {"dynamodb:Query"},
		// DeleteChat finds the chat's runs: store.Runs.DeleteChatRuns, a
		// Query of GSI2.
		"DataTable/index/GSI2": {"dynamodb:Query"},
		// the rate limit of posting a message: store.RateLimits.Hit, one
		// UpdateItem (ADD) per request.
		"RateLimitsTable": {"dynamodb:UpdateItem"},
	},
	"StreamFunction": {
		// the tool gate's policies (GetItem); each model call's reservation
		// and settle: store.Usage.Reserve and Settle (UpdateItem ADD).
		"UsersTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// the auth middleware.
		"SessionsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// StartStream: Conversation (Query); StartLoggedGeneration
		// (UpdateItem of the chat: its mark, the log's head; tx: Put user
		// and assistant messages + ConditionCheck on the chat); the
		// reply's log batches (PutItem; UpdateItem of the chat to renew
		// the lease) and its end (PutItem of the message, then of the
		// batch, UpdateItem of the chat); resume: Chat (GetItem), the log
		// (Query).
		// With a workflowId (chatsfn's runs.Service): CheckWorkflow's
		// store.Workflows.Workflow (GetItem); store.Runs.CreateRun (tx:
		// Put run and log head + ConditionCheck on the chat item); the
		// run's log, followed (Query); the run at its end (GetItem) and,
		// when the reply is stopped, its cancel (UpdateItem). No index.
		// A reply whose chat was deleted meanwhile deletes its leftovers
		// (store.Chats.DeleteChatLeftovers: BatchWriteItem, CHAT#* only).
		"DataTable": {"dynamodb:Query", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem", "dynamodb:BatchWriteItem"},
		// the stream's rate limit: store.RateLimits.Hit (UpdateItem).
		"RateLimitsTable": {"dynamodb:UpdateItem"},
	},
	// The sweeper: chat.Service.Interrupt over store.Chats: Chat, the
	// chat's mark (the log's head) and the message (GetItem), the log
	// (Query), the end (tx: Put message and batch, Update chat);
	// store.Leases.Expired (Query of GSI1 per ACTIVE#<shard> for runs, of
	// GSI2 for streamed replies).
	// It also resumes durable runs (runs.ResumeExpired over store.Runs:
	// LoggedRun by GetItem; ClaimRun, a tx of two Updates; an
	// interrupted run's end, a tx of Update run, Put batch, Update head):
	// the same actions.
	// That buffered fire's input may name an attachment, which the run
	// service checks (store.Attachments: the read, TransactGetItems;
	// MarkReady / MarkFailed, a tx with a ConditionCheck on the chat;
	// AttachmentChat, a Query of GSI1).
	// Account erasure (sweeperfn.Eraser): every chat and workflow of the
	// user deleted as their owner's delete does (collections and the runs
	// of GSI2, BatchWriteItem and DeleteItem); the queued request removed
	// (DeleteItem); the user's own items in every table
	// (store.Accounts.EraseUserItems, RateLimits.DeleteWindows:
	// BatchWriteItem of keys known or listed by the tables' user indexes).
	"SweeperFunction": {
		// A data export's runs: the pages of store.Runs (a Query of the
		// index, BatchGetItem of the runs).
		"DataTable":            {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem", "dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:BatchGetItem"},
		"DataTable/index/GSI1": {"dynamodb:Query"},
		"DataTable/index/GSI2": {"dynamodb:Query"},
		// the erasure's deletes; the export's profile, policies and
		// usage months (GetItem).
		"UsersTable":                       {"dynamodb:BatchWriteItem", "dynamodb:GetItem"},
		"SessionsTable":                    {"dynamodb:BatchWriteItem"},
		"SessionsTable/index/UserSessions": {"dynamodb:Query"},
		"OAuthTable":                       {"dynamodb:BatchWriteItem"},
		"OAuthTable/index/UserItems":       {"dynamodb:Query"},
		// The end of an interrupted schedule run may start its trigger's
		// buffered fire, counted against the run rate limit.
		"RateLimitsTable": {"dynamodb:UpdateItem", "dynamodb:BatchWriteItem"},
	},
	// The runner: store.Runs.LoggedRun (TransactGetItems of the run and
	// its log head: GetItem per item), SaveCheckpoint (tx: Update run, Put
	// log batch, Update head), a long step's lease renewal
	// (store.Jobs.Append: UpdateItem).
	"RunnerFunction": {
		// ... and the end of a schedule's run: trigger.Service.RunEnded
		// (the overlap markers, UpdateItem; the trigger, GetItem) and its
		// buffered fire's run (the workflow, GetItem; CreateRun, a tx of
		// Puts); an attachment a run's input names (the read,
		// TransactGetItems; MarkReady / MarkFailed, a tx with a
		// ConditionCheck on the chat).
		// knowledge_search: the knowledge base (GetItem) and its
		// documents (store.Knowledge.Documents, a Query).
		"DataTable": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem", "dynamodb:Query"},
		// That attachment's chat (store.AttachmentChat): a Query of GSI1.
		"DataTable/index/GSI1": {"dynamodb:Query"},
		// The tool gate of the steps: the run's user's tool policies
		// (GetItem), a metered tool's reservation and settle (UpdateItem).
		"UsersTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// That buffered fire's run counts against the run rate limit.
		"RateLimitsTable": {"dynamodb:UpdateItem"},
	},
	"WorkflowsFunction": {
		// the tool gate's policies (GetItem); a proposal's or a metered
		// step's reservation and settle (UpdateItem ADD).
		"UsersTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// the auth middleware.
		"SessionsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// store.Workflows: Workflow and ownerFailure (GetItem);
		// WorkflowProposal (TransactGetItems: GetItem per item);
		// Conversation and deleteCollection's key listing (Query);
		// CreateWorkflow (tx: Put workflow + Update counter), AddMessages
		// (tx: Put messages/proposal + ConditionCheck on the workflow),
		// ApplyProposal (tx: Update proposal + Put workflow),
		// DeleteWorkflow (tx: Delete workflow + Update counter);
		// UpdateWorkflow, RejectProposal (UpdateItem); deleteCollection's
		// batches (BatchWriteItem).
		// store.Runs: ChatOwner and Run (GetItem), CreateRun (tx: Put run
		// and log head + ConditionCheck on the chat), CancelRun
		// (UpdateItem), the run's log (Query: a run started without Prefer
		// is waited for, GET .../events), DeleteWorkflowRuns (each run's
		// collection: Query, BatchWriteItem, DeleteItem).
		// store.Triggers when a workflow is deleted: WorkflowTriggers
		// (Query of the references, BatchGetItem), DeleteTrigger (tx:
		// Delete trigger and reference, Update counter).
		"DataTable": {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
			"dynamodb:ConditionCheckItem", "dynamodb:Query", "dynamodb:BatchWriteItem"},
		// ListWorkflows and DeleteWorkflowRuns: Queries of GSI1.
		"DataTable/index/GSI1": {"dynamodb:Query"},
		// A chat's runs (ChatRunsPage): a Query of GSI2 (and, as a
		// workflow's runs, BatchGetItem of the runs its list entries name).
		"DataTable/index/GSI2": {"dynamodb:Query"},
		// the rate limits of the workflow chat and of runs:
		// store.RateLimits.Hit (UpdateItem).
		"RateLimitsTable": {"dynamodb:UpdateItem"},
	},
	"KnowledgeFunction": {
		// the auth middleware.
		"SessionsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// store.Knowledge: KnowledgeBase and Document (GetItem); the
		// lists and a knowledge base's items (Query); CreateKnowledgeBase,
		// DeleteKnowledgeBase, CreateDocument, FinishDocument,
		// RenewIndexing, ClaimIndexing, DeleteDocument (transactions of
		// Put, Update, Delete and ConditionCheck); UpdateKnowledgeBase
		// (UpdateItem); the purges of deleted documents' and knowledge
		// bases' vectors (knowledge.Purge: Put in the delete's tx,
		// UpdateItem to defer, DeleteItem at the end, and a knowledge
		// base's collection, Query and BatchWriteItem).
		// The attachment a document is made from: its read and settle,
		// as TriggersFunction's.
		"DataTable": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
			"dynamodb:ConditionCheckItem", "dynamodb:Query", "dynamodb:BatchWriteItem"},
		// That attachment's chat (store.AttachmentChat): a Query of GSI1.
		"DataTable/index/GSI1": {"dynamodb:Query"},
		// the rate limit of documents added: store.RateLimits.Hit
		// (UpdateItem).
		"RateLimitsTable": {"dynamodb:UpdateItem"},
	},
	// The indexing of a knowledge base document (knowledge.Service.Index
	// over store.Knowledge): the document (GetItem), the lease's renewal
	// (tx: ConditionCheck of the document, Update of the job's head), the
	// outcome (tx: Updates of the document, the knowledge base, the
	// head); the attachment it is made from: the read (TransactGetItems),
	// MarkReady / MarkFailed (a tx of Updates with a ConditionCheck).
	"KnowledgeIndexFunction": {
		"DataTable": {"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"},
		// That attachment's chat (store.AttachmentChat): a Query of GSI1.
		"DataTable/index/GSI1": {"dynamodb:Query"},
	},
	"TriggersFunction": {
		// the auth middleware.
		"SessionsTable": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
		// store.Triggers: Trigger, WorkflowOwner, a held delivery
		// (GetItem); CreateTrigger (tx: ConditionCheck on the workflow,
		// Put trigger and reference, Update counter); DeleteTrigger (tx:
		// Delete trigger and reference, Update counter); UpdateTrigger and
		// RecordFire (UpdateItem); WorkflowTriggers (Query of the
		// references, BatchGetItem); ClaimDeliveries (a conditional PutItem,
		// or a tx of them).
		// A webhook call's run: the workflow and the run (GetItem),
		// store.Runs.CreateRun (tx of Puts).
		// An attachment the run's input names: the read
		// (TransactGetItems), MarkReady / MarkFailed (tx with a
		// ConditionCheck on the chat).
		"DataTable": {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
			"dynamodb:ConditionCheckItem", "dynamodb:Query"},
		// That attachment's chat (store.AttachmentChat): a Query of GSI1.
		"DataTable/index/GSI1": {"dynamodb:Query"},
		// ... counted against the run rate limit.
		"RateLimitsTable": {"dynamodb:UpdateItem"},
	},
	// The schedules' target: trigger.Service.Fire over store.Triggers
	// (GetItem; the overlap markers and the last fire by UpdateItem).
	"TriggerFireFunction": {
		// ... and the run a fire starts: the workflow and the run
		// (GetItem), store.Runs.CreateRun (tx of Puts); an attachment its
		// input names (the read, TransactGetItems; MarkReady / MarkFailed,
		// a tx with a ConditionCheck on the chat).
		"DataTable": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"},
		// That attachment's chat (store.AttachmentChat): a Query of GSI1.
		"DataTable/index/GSI1": {"dynamodb:Query"},
		// ... counted against the run rate limit.
		"RateLimitsTable": {"dynamodb:UpdateItem"},
	},
}

// nameOnly lists, per function, tables whose name it receives without any
// access: its main requires the variable (config.Require) although no
// code path of the function touches the table. The alternative, a grant
// the code never uses, is what least privilege rules out. checkIAM keeps
// each entry honest: the main must still name the variable, and the
// function must have no access to the table.
// Every function that names the Users table now reads it (the budget
// check), so there is no entry today.
var nameOnly = map[string][]string{}

// The tool server (functions/mcp) is reached through its function URL, not
// the HTTP API; the functions that call it get its URL and key.
const (
	toolServerID    = "McpFunction"
	toolServerURL   = getAttMark + toolServerID + "Url.FunctionUrl" // SAM's <Function>Url resource
	serviceKeyParam = "MCPServiceKey"
	// minToolServerTimeout: a tool runs up to 30 s (tools.DefaultTimeout);
	// the function must outlive it to report TOOL_TIMEOUT.
	minToolServerTimeout = 31
	// maxAPITimeout: API Gateway ends every HTTP API integration at 30 s;
	// a function behind it that runs longer (a synchronous workflow run, a
	// long reply) keeps running after the client got 503. Long work
	// belongs in the stream (check (i)).
	maxAPITimeout = 30
)

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

// stack is template.yaml in the two views described in the package comment.
type stack struct {
	tmpl      *cloudformation.Template
	functions map[string]*serverless.Function
	tables    map[string]*dynamodb.Table
	globalFn  *global.Function // nil without Globals.Function
	raw       map[string]any   // the whole template, intrinsics as markers
	tree      map[string]any   // the whole template, conditions and other intrinsics kept
}

var processorOptions = &intrinsics.ProcessorOptions{
	IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{
		"Ref": func(_ string, in, _ any) any { return refMark + fmt.Sprint(in) },
		"Fn::GetAtt": func(_ string, in, _ any) any {
			// !GetAtt A.B arrives as "A.B", the long form as ["A", "B"].
			if parts, ok := in.([]any); ok {
				s := make([]string, len(parts))
				for i, p := range parts {
					s[i] = fmt.Sprint(p)
				}
				return getAttMark + strings.Join(s, ".")
			}
			return getAttMark + fmt.Sprint(in)
		},
		"Fn::Sub": func(_ string, in, _ any) any {
			// !Sub "s" or [ "s", {vars} ]: keep the string.
			if parts, ok := in.([]any); ok && len(parts) > 0 {
				return subMark + fmt.Sprint(parts[0])
			}
			return subMark + fmt.Sprint(in)
		},
	},
	// Conditions are evaluated (with the markers above), so that the
	// `CorsEnabled` branch of the HttpApi's CorsConfiguration is what both
	// views see.
	EvaluateConditions: true,
}

// keepIntrinsic keeps an intrinsic as an object {name: processed args}.
func keepIntrinsic(name string, in, _ any) any { return map[string]any{name: in} }

// structuralOptions produce the structural tree: the same markers for Ref,
// Fn::GetAtt and Fn::Sub, every other intrinsic kept, no condition
// evaluated.
var structuralOptions = func() *intrinsics.ProcessorOptions {
	o := &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{}}
	for k, h := range processorOptions.IntrinsicHandlerOverrides {
		o.IntrinsicHandlerOverrides[k] = h
	}
	for _, name := range []string{"Fn::If", "Fn::Not", "Fn::Equals", "Fn::And", "Fn::Or",
		"Fn::Select", "Fn::Split", "Fn::Join", "Fn::FindInMap", "Fn::Base64", "Fn::GetAZs", "Fn::ImportValue"} {
		o.IntrinsicHandlerOverrides[name] = keepIntrinsic
	}
	return o
}()

// parseMu serializes parsing: goformation registers its YAML tag resolvers
// in a package-level map on every parse.
var parseMu sync.Mutex

func parse(data []byte) (*stack, error) {
	parseMu.Lock()
	defer parseMu.Unlock()
	js, err := intrinsics.ProcessYAML(data, processorOptions)
	if err != nil {
		return nil, fmt.Errorf("intrinsics: %w", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, err
	}
	tmpl, err := typed(raw)
	if err != nil {
		return nil, fmt.Errorf("goformation: %w", err)
	}
	js, err = intrinsics.ProcessYAML(data, structuralOptions)
	if err != nil {
		return nil, fmt.Errorf("intrinsics (structural): %w", err)
	}
	var tree map[string]any
	if err := json.Unmarshal(js, &tree); err != nil {
		return nil, err
	}
	s := &stack{
		tmpl:      tmpl,
		functions: tmpl.GetAllServerlessFunctionResources(),
		tables:    tmpl.GetAllDynamoDBTableResources(),
		raw:       raw,
		tree:      tree,
	}
	if g, err := tmpl.GetServerlessGlobalFunction(); err == nil {
		s.globalFn = g
	}
	return s, nil
}

// typed is goformation's typed view of the processed template raw (what
// goformation.ParseYAMLWithOptions makes of it), without the resources
// of types goformation has no struct for (the S3 Vectors bucket and
// index) and of the log groups (their RetentionInDays is a !Ref marker
// where goformation wants an int): it fails on those, and the checks read
// them in the raw view.
func typed(raw map[string]any) (*cloudformation.Template, error) {
	known := cloudformation.AllResources()
	copied := make(map[string]any, len(raw))
	for k, v := range raw {
		copied[k] = v
	}
	resources := map[string]any{}
	for id, r := range asMap(raw["Resources"]) {
		typ, _ := asMap(r)["Type"].(string)
		if _, ok := known[typ]; (ok && typ != "AWS::Logs::LogGroup") || strings.HasPrefix(typ, "Custom::") {
			resources[id] = r
		}
	}
	copied["Resources"] = resources
	js, err := json.Marshal(copied)
	if err != nil {
		return nil, err
	}
	tmpl := cloudformation.NewTemplate()
	if err := json.Unmarshal(js, tmpl); err != nil {
		return nil, err
	}
	return tmpl, nil
}

// resources returns the raw Resources section.
func (s *stack) resources() map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range asMap(s.raw["Resources"]) {
		out[id] = asMap(r)
	}
	return out
}

// resourceType returns the Type of resource id, "" when there is none.
func (s *stack) resourceType(id string) string {
	t, _ := s.resources()[id]["Type"].(string)
	return t
}

// env returns the function's environment: Globals merged with its own
// variables (as SAM merges them).
func (s *stack) env(fn *serverless.Function) map[string]string {
	env := map[string]string{}
	if s.globalFn != nil && s.globalFn.Environment != nil {
		for k, v := range s.globalFn.Environment.Variables {
			env[k] = v
		}
	}
	if fn.Environment != nil {
		for k, v := range fn.Environment.Variables {
			env[k] = v
		}
	}
	return env
}

// httpAPIEvents returns the function's HttpApi events by name.
func httpAPIEvents(fn *serverless.Function) map[string]*serverless.Function_HttpApiEvent {
	out := map[string]*serverless.Function_HttpApiEvent{}
	for name, ev := range fn.Events {
		if ev.Type != "HttpApi" {
			continue
		}
		var p *serverless.Function_HttpApiEvent
		if ev.Properties != nil {
			p = ev.Properties.HttpApiEvent
		}
		if p == nil {
			p = &serverless.Function_HttpApiEvent{}
		}
		out[name] = p
	}
	return out
}

// scheduleEvents returns fn's Schedule events' schedule expressions by
// event name.
func scheduleEvents(fn *serverless.Function) map[string]string {
	out := map[string]string{}
	for name, ev := range fn.Events {
		if ev.Type != "Schedule" {
			continue
		}
		out[name] = ""
		if ev.Properties != nil && ev.Properties.ScheduleEvent != nil {
			out[name] = ev.Properties.ScheduleEvent.Schedule
		}
	}
	return out
}

// sweeperID is the function that ends expired leases (functions/sweeper).
const sweeperID = "SweeperFunction"

// (l) The sweeper runs on an EventBridge schedule every minute and on
// nothing else (no route, no URL), and is the only scheduled function.
func checkSweeper(s *stack, _ *codeFacts) []string {
	var probs []string
	for _, id := range sortedKeys(s.functions) {
		fn := s.functions[id]
		sched := scheduleEvents(fn)
		if id != sweeperID {
			if len(sched) > 0 {
				probs = append(probs, fmt.Sprintf("%s: has a Schedule; only %s runs on one", id, sweeperID))
			}
			continue
		}
		if len(sched) != 1 || len(fn.Events) != 1 {
			probs = append(probs, fmt.Sprintf("%s: events %v, want exactly one Schedule", id, sched))
		}
		for name, expr := range sched {
			if expr != "rate(1 minute)" {
				probs = append(probs, fmt.Sprintf("%s: event %s runs on %q, want rate(1 minute)", id, name, expr))
			}
		}
		if fn.FunctionUrlConfig != nil {
			probs = append(probs, fmt.Sprintf("%s: has a function URL; it must not be reachable over HTTP", id))
		}
	}
	if _, ok := s.functions[sweeperID]; !ok {
		probs = append(probs, sweeperID+": missing; nothing would end the replies of dead processes")
	}
	return probs
}

// runnerID is the function that executes durable workflow runs
// (functions/runner); runnerInvokers are the functions that hand it runs.
const runnerID = "RunnerFunction"

var runnerInvokers = []string{"McpGatewayFunction", "StreamFunction", "SweeperFunction", "TriggerFireFunction", "TriggersFunction", "WorkflowsFunction"}

// runnerName is RunnerFunction's explicit name, and runnerSelfARN the
// resource of its one invoke statement: the runs it starts itself (a
// schedule's buffered fire when a run ends) go to itself, named by its
// name, as a policy naming it by !GetAtt would depend on the function
// that depends on it.
const (
	runnerName    = subMark + "${AWS::StackName}-runner"
	runnerSelfARN = subMark + "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-runner"
)

// isInvokeStatement reports whether a policy statement grants
// lambda:InvokeFunction.
func isInvokeStatement(stmt map[string]any) bool {
	return slices.Contains(strs(stmt["Action"]), "lambda:InvokeFunction")
}

// (m) The runner is reached only through asynchronous invokes: it has no
// route, URL or schedule; exactly the runnerInvokers may invoke it, each
// with one statement of lambda:InvokeFunction alone on !GetAtt
// RunnerFunction.Arn and RUNNER_FUNCTION = !Ref RunnerFunction; no
// function may invoke anything else; and its failed events go to an SQS
// queue of the template (EventInvokeConfig OnFailure).
func checkRunnerInvokes(s *stack, _ *codeFacts) []string {
	var probs []string
	fn, ok := s.functions[runnerID]
	if !ok {
		return []string{runnerID + ": missing; nothing would execute durable runs"}
	}
	if len(fn.Events) > 0 || fn.FunctionUrlConfig != nil {
		probs = append(probs, runnerID+": has events or a function URL; it is invoked only asynchronously by "+strings.Join(runnerInvokers, ", "))
	}
	res := s.resources()
	cfg := asMap(asMap(res[runnerID]["Properties"])["EventInvokeConfig"])
	onFailure := asMap(asMap(cfg["DestinationConfig"])["OnFailure"])
	dest, _ := onFailure["Destination"].(string)
	queue, _ := strings.CutSuffix(strings.TrimPrefix(dest, getAttMark), ".Arn")
	if onFailure["Type"] != "SQS" || !strings.HasPrefix(dest, getAttMark) || res[queue]["Type"] != "AWS::SQS::Queue" {
		probs = append(probs, fmt.Sprintf("%s: EventInvokeConfig.DestinationConfig.OnFailure %v, want Type SQS and !GetAtt <Queue>.Arn of a queue in the template", runnerID, onFailure))
	}
	for _, id := range sortedKeys(s.functions) {
		props := asMap(res[id]["Properties"])
		docs, _ := props["Policies"].([]any)
		invokes := 0
		for _, d := range docs {
			stmts, _ := asMap(d)["Statement"].([]any)
			for _, st := range stmts {
				stmt := asMap(st)
				if !isInvokeStatement(stmt) || isKnowledgeIndexInvoke(stmt) {
					continue // an indexing job's invoke is TestKnowledgeIndexInvokes'
				}
				invokes++
				target := getAttMark + runnerID + ".Arn"
				if id == runnerID {
					target = runnerSelfARN
				}
				if a, r := strs(stmt["Action"]), strs(stmt["Resource"]); len(a) != 1 || len(r) != 1 || r[0] != target || stmt["Effect"] != "Allow" {
					probs = append(probs, fmt.Sprintf("%s: invoke statement %v, want lambda:InvokeFunction alone on %s", id, stmt, target))
				}
			}
		}
		env := asMap(asMap(asMap(props["Environment"])["Variables"]))
		if id == runnerID {
			if name, _ := props["FunctionName"].(string); name != runnerName || invokes != 1 {
				probs = append(probs, fmt.Sprintf("%s: FunctionName %q and %d invoke statements, want %q and one on itself", id, name, invokes, runnerName))
			}
			if _, has := env["RUNNER_FUNCTION"]; has {
				probs = append(probs, runnerID+": RUNNER_FUNCTION set; it hands its own runs to itself by name")
			}
			continue
		}
		want := slices.Contains(runnerInvokers, id)
		switch {
		case want && invokes != 1:
			probs = append(probs, fmt.Sprintf("%s: %d lambda:InvokeFunction statements, want 1 (it hands runs to %s)", id, invokes, runnerID))
		case !want && invokes > 0:
			probs = append(probs, fmt.Sprintf("%s: may invoke %s but hands it no runs", id, runnerID))
		}
		if got, has := env["RUNNER_FUNCTION"]; (want && got != refMark+runnerID) || (!want && has) {
			probs = append(probs, fmt.Sprintf("%s: RUNNER_FUNCTION %v, want !Ref %s only in %v", id, got, runnerID, runnerInvokers))
		}
	}
	return probs
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// strs reads a string or a list of strings.
func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ---------------------------------------------------------------------------
// The code side: function folders, the Makefile, the routers.
// ---------------------------------------------------------------------------

// codeFacts is what the checks compare the template with.
type codeFacts struct {
	dirs []string // folders under functions/
	// mains is functions/<dir>/main.go by dir, followed by the sources of
	// the builder packages (functions/assembly/...) it imports: what the
	// function's bootstrap requires and builds.
	mains map[string]string
	// builders are the package-qualified names of the functions/assembly
	// builders each main refers to, by dir (".../assembly/chatsfn.Chats").
	builders map[string][]string
	makefile string                 // the Makefile
	routes   []localFunction        // local.Functions with their patterns and builders
	tables   map[string]store.Table // store.Tables() by LogicalID
	// bedrockActions are the IAM actions of the Bedrock runtime calls in
	// shared/model/bedrock (sorted).
	bedrockActions []string
	// registryBuilders are the calls that build the model registry:
	// providers.Registry and the functions of functions/assembly/*
	// packages that call it (e.g. "mcpfn.Mcp").
	registryBuilders []string
}

type localFunction struct {
	LogicalID, Dir string
	Patterns       []string
	// FunctionURL: served by its own function URL behind CloudFront, not
	// by the HTTP API.
	FunctionURL bool
	// Builder is the builder infra/local built the routes with.
	Builder string
}

// facts builds the stack of infra/local once (it starts the embedded
// DynamoDB engine, which is closed again right after the routes are read).
var facts = sync.OnceValues(func() (*codeFacts, error) {
	f := &codeFacts{tables: map[string]store.Table{}, mains: map[string]string{}, builders: map[string][]string{}}
	entries, err := os.ReadDir(filepath.Join(root, "functions"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		// A function is a folder with a main.go; others (functions/assembly
		// with the builders, a function being written) are not.
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "functions", e.Name(), "main.go")); err == nil {
			f.dirs = append(f.dirs, e.Name())
			if f.mains[e.Name()], f.builders[e.Name()], err = mainOf(filepath.Join(root, "functions", e.Name())); err != nil {
				return nil, err
			}
		}
	}
	if f.registryBuilders, err = registryBuildersOf(filepath.Join(root, "functions", "assembly")); err != nil {
		return nil, err
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, err
	}
	f.makefile = string(mk)
	for _, t := range store.Tables() {
		f.tables[t.LogicalID] = t
	}
	if f.bedrockActions, err = bedrockActionsOf(filepath.Join(root, "shared", "model", "bedrock")); err != nil {
		return nil, err
	}

	env := map[string]string{"LOG_LEVEL": "error"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		return nil, err
	}
	st, err := local.New(context.Background(), cfg, local.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	for _, fn := range st.Functions {
		f.routes = append(f.routes, localFunction{LogicalID: fn.LogicalID, Dir: fn.Dir, Patterns: fn.Router.Patterns(), FunctionURL: fn.FunctionURL, Builder: fn.Builder})
	}
	return f, nil
})

// assemblyPath is the import path of the builders' packages.
const assemblyPath = "github.com/workflowchat/service/functions/assembly"

// mainOf returns the source of dir/main.go followed by the sources (tests
// excluded) of the builder packages under functions/assembly it imports,
// and the builders it refers to as "<import path>.<Name>".
func mainOf(dir string) (string, []string, error) {
	fset := token.NewFileSet()
	name := filepath.Join(dir, "main.go")
	src, err := os.ReadFile(name)
	if err != nil {
		return "", nil, err
	}
	file, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return "", nil, err
	}
	text := string(src)
	imports := map[string]string{} // local name -> path of builder packages
	for _, imp := range file.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if path != assemblyPath && !strings.HasPrefix(path, assemblyPath+"/") {
			continue
		}
		local := filepath.Base(path)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		imports[local] = path
		if path == assemblyPath {
			continue // the hosts' helpers, not a builder
		}
		pkgDir := filepath.Join(root, "functions", strings.TrimPrefix(path, "github.com/workflowchat/service/functions/"))
		files, err := filepath.Glob(filepath.Join(pkgDir, "*.go"))
		if err != nil {
			return "", nil, err
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return "", nil, err
			}
			text += "\n" + string(b)
		}
	}
	var builders []string
	ast.Inspect(file, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] != "" && imports[x.Name] != assemblyPath {
				builders = append(builders, imports[x.Name]+"."+sel.Sel.Name)
			}
		}
		return true
	})
	return text, builders, nil
}

// routeKey turns a Go ServeMux pattern into an API Gateway route key
// ("METHOD /path"): no method is ANY, "{name...}" is "{name+}", "{$}" is
// dropped.
func routeKey(pattern string) (string, error) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "ANY", pattern
	}
	path = strings.TrimSpace(path)
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("pattern %q: host patterns have no API Gateway route", pattern)
	}
	path = strings.TrimSuffix(path, "{$}")
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "...}") {
			segs[i] = strings.TrimSuffix(s, "...}") + "+}"
		}
	}
	return strings.ToUpper(method) + " " + strings.Join(segs, "/"), nil
}

// ---------------------------------------------------------------------------
// Checks. Each returns the problems it found; none means the check passed.
// ---------------------------------------------------------------------------

type check func(s *stack, f *codeFacts) []string

var checks = []struct {
	name string
	fn   check
}{
	{"a_functions_match_folders", checkFunctions},
	{"b_routes_match_routers", checkRoutes},
	{"c_tables_match_store", checkTables},
	{"d_iam_least_privilege", checkIAM},
	{"d_iam_reviewed_contract", checkGrantContract},
	{"e_table_env_vars", checkTableEnv},
	{"f_header_and_outputs", checkOutputs},
	{"g_cors", checkCORS},
	{"h_function_urls_and_tool_server", checkFunctionURLs},
	{"i_streaming_function_urls", checkStreamingURLs},
	{"j_cloudfront_single_origin", checkCloudFront},
	{"k_model_providers", checkModelProviders},
	{"l_sweeper_schedule", checkSweeper},
	{"m_runner_invokes", checkRunnerInvokes},
	{"n_alarms", checkAlarms},
	{"n_trigger_schedules", checkTriggerSchedules},
	{"n_blob_bucket", checkBlobBucket},
	{"o_blob_grants", checkBlobGrants},
	{"p_signing_key_secret", checkSigningSecret},
	{"q_viewer_host", checkViewerHost},
	{"r_tracing", checkTracing},
	{"s_memory_sizes", checkMemory},
	{"t_vault_key", checkVaultKey},
}

// (a) Every folder under functions/ with a main.go has exactly one AWS::Serverless::Function
// that the Makefile's build-%Function target builds from it (the logical id
// minus "Function", lower-cased, is the folder: HealthFunction ->
// functions/health), and every function has a folder. Each is a bootstrap
// binary on provided.al2023 for arm64, built by the makefile builder from
// the repository root.
func checkFunctions(s *stack, f *codeFacts) []string {
	var probs []string
	if !strings.Contains(f.makefile, "\nbuild-%Function:") {
		probs = append(probs, "Makefile: no build-%Function target for SAM's makefile builder")
	}
	dirOf := func(id string) (string, bool) {
		base, ok := strings.CutSuffix(id, "Function")
		if !ok || base == "" || base[0] < 'A' || base[0] > 'Z' {
			return "", false
		}
		return strings.ToLower(base), true
	}
	byDir := map[string][]string{}
	for _, id := range sortedKeys(s.functions) {
		dir, ok := dirOf(id)
		if !ok {
			probs = append(probs, fmt.Sprintf("%s: logical id must be <Dir>Function for the Makefile's build-%%Function target", id))
			continue
		}
		if !slices.Contains(f.dirs, dir) {
			probs = append(probs, fmt.Sprintf("%s: no functions/%s/main.go", id, dir))
		}
		byDir[dir] = append(byDir[dir], id)
	}
	for _, dir := range f.dirs {
		switch ids := byDir[dir]; len(ids) {
		case 1:
		case 0:
			probs = append(probs, fmt.Sprintf("functions/%s: no AWS::Serverless::Function %sFunction", dir, strings.ToUpper(dir[:1])+dir[1:]))
		default:
			probs = append(probs, fmt.Sprintf("functions/%s: built by several functions %v", dir, ids))
		}
	}

	// Each function infra/local mounts is built by the builder its Lambda
	// bootstrap calls: the dev server and AWS serve the same routers.
	for _, lf := range f.routes {
		if !slices.Contains(f.builders[lf.Dir], lf.Builder) {
			probs = append(probs, fmt.Sprintf("%s: infra/local builds it with %s but functions/%s/main.go calls %v", lf.LogicalID, lf.Builder, lf.Dir, f.builders[lf.Dir]))
		}
		if _, name, _ := strings.Cut(filepath.Base(lf.Builder), "."); name+"Function" != lf.LogicalID {
			probs = append(probs, fmt.Sprintf("%s: its builder %s is not named after it", lf.LogicalID, lf.Builder))
		}
	}

	var g global.Function
	if s.globalFn != nil {
		g = *s.globalFn
	}
	for _, id := range sortedKeys(s.functions) {
		fn := s.functions[id]
		runtime, handler, archs := deref(fn.Runtime), deref(fn.Handler), fn.Architectures
		if runtime == "" {
			runtime = deref(g.Runtime)
		}
		if handler == "" {
			handler = deref(g.Handler)
		}
		if archs == nil {
			archs = deref(g.Architectures)
		}
		if runtime != "provided.al2023" {
			probs = append(probs, fmt.Sprintf("%s: Runtime %q, want provided.al2023", id, runtime))
		}
		if handler != "bootstrap" {
			probs = append(probs, fmt.Sprintf("%s: Handler %q, want bootstrap", id, handler))
		}
		if !slices.Equal(archs, []string{"arm64"}) {
			probs = append(probs, fmt.Sprintf("%s: Architectures %v, want [arm64] (the Makefile builds GOARCH=arm64)", id, archs))
		}
		if bm := fn.AWSCloudFormationMetadata["BuildMethod"]; bm != "makefile" {
			probs = append(probs, fmt.Sprintf("%s: Metadata.BuildMethod %v, want makefile", id, bm))
		}
		codeURI := ""
		if fn.CodeUri != nil {
			codeURI = deref(fn.CodeUri.String)
		} else if g.CodeUri != nil {
			codeURI = deref(g.CodeUri.String)
		}
		if codeURI != "." {
			probs = append(probs, fmt.Sprintf("%s: CodeUri %q, want \".\" (the Makefile is at the repository root)", id, codeURI))
		}
		if fn.PackageType != nil && *fn.PackageType != "Zip" {
			probs = append(probs, fmt.Sprintf("%s: PackageType %s, want Zip", id, *fn.PackageType))
		}
	}
	return probs
}

// (b) For every HTTP API function of infra/local, its HttpApi events
// (Method+Path) are exactly its router's patterns; every function with
// HttpApi events is one of them; every HttpApi event hangs off the HttpApi
// resource with payload format 2.0; no route is served twice; no REST API
// (Api) events; a function with HttpApi events times out within the
// integration limit (maxAPITimeout). Functions served by their own
// function URL (FunctionURL in infra/local) are check (i)'s and (j)'s.
func checkRoutes(s *stack, f *codeFacts) []string {
	var probs []string
	if t := s.resourceType(httpAPIID); t != "AWS::Serverless::HttpApi" {
		probs = append(probs, fmt.Sprintf("resource %s: type %q, want AWS::Serverless::HttpApi", httpAPIID, t))
	}
	served := map[string]string{} // route key -> function
	templateRoutes := map[string]map[string]bool{}
	for _, id := range sortedKeys(s.functions) {
		fn := s.functions[id]
		for _, name := range sortedKeys(fn.Events) {
			if fn.Events[name].Type == "Api" {
				probs = append(probs, fmt.Sprintf("%s event %s: type Api (REST API); routes belong on the HTTP API (type HttpApi)", id, name))
			}
		}
		evs := httpAPIEvents(fn)
		if len(evs) == 0 {
			continue
		}
		if t := s.timeout(id); t > maxAPITimeout {
			probs = append(probs, fmt.Sprintf("%s: Timeout %d s behind the HTTP API, whose integrations end at %d s; long work belongs in the stream", id, t, maxAPITimeout))
		}
		templateRoutes[id] = map[string]bool{}
		for _, name := range sortedKeys(evs) {
			ev := evs[name]
			if api := deref(ev.ApiId); api != refMark+httpAPIID {
				probs = append(probs, fmt.Sprintf("%s event %s: ApiId %q, want !Ref %s", id, name, api, httpAPIID))
			}
			if v := deref(ev.PayloadFormatVersion); v != "" && v != "2.0" {
				probs = append(probs, fmt.Sprintf("%s event %s: PayloadFormatVersion %s, want 2.0", id, name, v))
			}
			method, path := strings.ToUpper(deref(ev.Method)), deref(ev.Path)
			if method == "" || path == "" {
				probs = append(probs, fmt.Sprintf("%s event %s: Method and Path are required (no catch-all routes)", id, name))
				continue
			}
			key := method + " " + path
			if other, dup := served[key]; dup {
				probs = append(probs, fmt.Sprintf("route %s: served by both %s and %s", key, other, id))
			}
			served[key] = id
			templateRoutes[id][key] = true
		}
	}

	inLocal := map[string]bool{}
	for _, lf := range f.routes {
		inLocal[lf.LogicalID] = true
		if _, ok := s.functions[lf.LogicalID]; !ok {
			probs = append(probs, fmt.Sprintf("%s (infra/local, functions/%s): not in the template", lf.LogicalID, lf.Dir))
			continue
		}
		if lf.FunctionURL {
			continue
		}
		want := map[string]bool{}
		for _, p := range lf.Patterns {
			key, err := routeKey(p)
			if err != nil {
				probs = append(probs, fmt.Sprintf("%s: %v", lf.LogicalID, err))
				continue
			}
			want[key] = true
		}
		got := templateRoutes[lf.LogicalID]
		for _, k := range sortedKeys(want) {
			if !got[k] {
				probs = append(probs, fmt.Sprintf("%s: route %s is registered by its router but has no HttpApi event", lf.LogicalID, k))
			}
		}
		for _, k := range sortedKeys(got) {
			if !want[k] {
				probs = append(probs, fmt.Sprintf("%s: HttpApi event %s is not registered by its router", lf.LogicalID, k))
			}
		}
	}
	for _, id := range sortedKeys(templateRoutes) {
		if !inLocal[id] {
			probs = append(probs, fmt.Sprintf("%s: has HttpApi events but is not in infra/local's Functions (its routes would be missing locally and unchecked)", id))
		}
	}
	return probs
}

// (c) Every table of shared/store is an AWS::DynamoDB::Table with its
// LogicalID whose keys, attribute definitions, GSIs (projection ALL),
// billing and TTL are what the Go definition creates locally; no other
// tables; data kept safe (PITR, SSE, Retain).
func checkTables(s *stack, f *codeFacts) []string {
	var probs []string
	for id, r := range s.resources() {
		if t, _ := r["Type"].(string); t == "AWS::Serverless::SimpleTable" {
			probs = append(probs, fmt.Sprintf("%s: AWS::Serverless::SimpleTable; tables are AWS::DynamoDB::Table defined in shared/store", id))
		}
	}
	for _, id := range sortedKeys(s.tables) {
		if _, ok := f.tables[id]; !ok {
			probs = append(probs, fmt.Sprintf("%s: table not defined in shared/store (store.Tables)", id))
		}
	}
	for _, id := range sortedKeys(f.tables) {
		def := f.tables[id]
		tbl, ok := s.tables[id]
		if !ok {
			probs = append(probs, fmt.Sprintf("%s: store table missing from the template (or not an AWS::DynamoDB::Table)", id))
			continue
		}
		want := def.CreateTableInput("unused")
		add := func(format string, args ...any) {
			probs = append(probs, id+": "+fmt.Sprintf(format, args...))
		}

		if got, w := deref(tbl.BillingMode), string(want.BillingMode); got != w {
			add("BillingMode %q, want %q", got, w)
		}
		if tbl.ProvisionedThroughput != nil {
			add("ProvisionedThroughput set; billing is on demand")
		}

		var wantKeys, gotKeys []string
		for _, k := range want.KeySchema {
			wantKeys = append(wantKeys, deref(k.AttributeName)+" "+string(k.KeyType))
		}
		for _, k := range tbl.KeySchema {
			gotKeys = append(gotKeys, k.AttributeName+" "+k.KeyType)
		}
		if !slices.Equal(gotKeys, wantKeys) {
			add("KeySchema %v, want %v", gotKeys, wantKeys)
		}

		var wantAttrs, gotAttrs []string
		for _, a := range want.AttributeDefinitions {
			wantAttrs = append(wantAttrs, deref(a.AttributeName)+" "+string(a.AttributeType))
		}
		for _, a := range tbl.AttributeDefinitions {
			gotAttrs = append(gotAttrs, a.AttributeName+" "+a.AttributeType)
		}
		sort.Strings(wantAttrs)
		sort.Strings(gotAttrs)
		if !slices.Equal(gotAttrs, wantAttrs) {
			add("AttributeDefinitions %v, want %v", gotAttrs, wantAttrs)
		}

		wantGSI := map[string]string{}
		for _, ix := range want.GlobalSecondaryIndexes {
			var ks []string
			for _, k := range ix.KeySchema {
				ks = append(ks, deref(k.AttributeName)+" "+string(k.KeyType))
			}
			wantGSI[deref(ix.IndexName)] = strings.Join(ks, ", ") + " / " + string(ix.Projection.ProjectionType)
		}
		gotGSI := map[string]string{}
		for _, ix := range tbl.GlobalSecondaryIndexes {
			var ks []string
			for _, k := range ix.KeySchema {
				ks = append(ks, k.AttributeName+" "+k.KeyType)
			}
			proj := ""
			if ix.Projection != nil {
				proj = deref(ix.Projection.ProjectionType)
			}
			gotGSI[ix.IndexName] = strings.Join(ks, ", ") + " / " + proj
			if ix.ProvisionedThroughput != nil {
				add("GSI %s: ProvisionedThroughput set; billing is on demand", ix.IndexName)
			}
		}
		for _, name := range sortedKeys(wantGSI) {
			if gotGSI[name] != wantGSI[name] {
				add("GSI %s: %q, want %q", name, gotGSI[name], wantGSI[name])
			}
		}
		for _, name := range sortedKeys(gotGSI) {
			if _, ok := wantGSI[name]; !ok {
				add("GSI %s: not in the Go definition", name)
			}
		}
		if len(tbl.LocalSecondaryIndexes) > 0 {
			add("LocalSecondaryIndexes: not in the Go definition")
		}

		switch ttl := tbl.TimeToLiveSpecification; {
		case def.TTLAttribute == "" && ttl != nil && ttl.Enabled:
			add("TTL enabled on %q; the Go definition has no TTL attribute", deref(ttl.AttributeName))
		case def.TTLAttribute != "" && (ttl == nil || !ttl.Enabled || deref(ttl.AttributeName) != def.TTLAttribute):
			add("TimeToLiveSpecification %+v, want enabled on %q", ttl, def.TTLAttribute)
		}

		if p := tbl.PointInTimeRecoverySpecification; p == nil || !deref(p.PointInTimeRecoveryEnabled) {
			add("point-in-time recovery not enabled")
		}
		if sse := tbl.SSESpecification; sse == nil || !sse.SSEEnabled {
			add("SSESpecification.SSEEnabled not true")
		}
		if tbl.AWSCloudFormationDeletionPolicy != "Retain" || tbl.AWSCloudFormationUpdateReplacePolicy != "Retain" {
			add("DeletionPolicy %q / UpdateReplacePolicy %q, want Retain / Retain", tbl.AWSCloudFormationDeletionPolicy, tbl.AWSCloudFormationUpdateReplacePolicy)
		}
		if tbl.TableName != nil {
			add("TableName set; let CloudFormation name tables (functions get names by !Ref)")
		}
	}
	return probs
}

// grant is one resource a policy statement names.
type grant struct {
	table, index string // index "" for the table itself
}

// grants reads the function's inline policy statements, reporting anything
// that is not an allowed action on a table or index of the template.
func grants(s *stack, id string) (map[grant]map[string]bool, []string) {
	var probs []string
	out := map[grant]map[string]bool{}
	props := asMap(s.resources()[id]["Properties"])
	if _, ok := props["Role"]; ok {
		probs = append(probs, id+": Role set; use inline Policies so the SAM-made role is checkable")
	}
	if _, ok := props["PermissionsBoundary"]; ok {
		probs = append(probs, id+": PermissionsBoundary is not expected")
	}
	pol, ok := props["Policies"]
	if !ok {
		return out, probs
	}
	docs, isList := pol.([]any)
	if !isList {
		docs = []any{pol}
	}
	for i, d := range docs {
		if d == noValue {
			continue // an Fn::If branch that adds no policy
		}
		doc := asMap(d)
		if doc == nil || doc["Statement"] == nil {
			probs = append(probs, fmt.Sprintf("%s: Policies[%d] %v is not an inline policy document (managed policies and SAM policy templates are too broad to check)", id, i, d))
			continue
		}
		for k := range doc {
			if k != "Statement" && k != "Version" {
				probs = append(probs, fmt.Sprintf("%s: Policies[%d]: unexpected key %s", id, i, k))
			}
		}
		stmts, isList := doc["Statement"].([]any)
		if !isList {
			stmts = []any{doc["Statement"]}
		}
		for j, st := range stmts {
			if st == noValue {
				continue
			}
			stmt := asMap(st)
			where := fmt.Sprintf("%s: Policies[%d].Statement[%d]", id, i, j)
			if isInvokeStatement(stmt) {
				continue // check (m)'s
			}
			if isSchedulerStatement(stmt) {
				continue // check (n)'s
			}
			if isVectorsStatement(stmt) {
				continue // TestKnowledgeVectorGrants'
			}
			if n := countS3(strs(stmt["Action"])); n > 0 {
				// S3 statements are check (o)'s.
				if n < len(strs(stmt["Action"])) {
					probs = append(probs, fmt.Sprintf("%s: mixes s3: and other actions; blob access gets statements of its own", where))
				}
				continue
			}
			if isSecretStatement(stmt) {
				continue // check (n)'s
			}
			if isVaultStatement(stmt) {
				continue // check (t)'s
			}
			if n := countXRay(strs(stmt["Action"])); n > 0 {
				// X-Ray statements are check (r)'s: their own policy,
				// under the TracingEnabled condition.
				if n < len(strs(stmt["Action"])) {
					probs = append(probs, fmt.Sprintf("%s: mixes xray: and other actions; tracing gets its own conditional policy", where))
				}
				continue
			}
			if n := countBedrock(strs(stmt["Action"])); n > 0 {
				// Bedrock statements are check (k)'s: their own policy,
				// under the BedrockEnabled condition.
				if n < len(strs(stmt["Action"])) {
					probs = append(probs, fmt.Sprintf("%s: mixes bedrock: and other actions; Bedrock gets its own conditional policy", where))
				}
				continue
			}
			if stmt["Effect"] != "Allow" {
				probs = append(probs, fmt.Sprintf("%s: Effect %v, want Allow", where, stmt["Effect"]))
			}
			for _, k := range []string{"NotAction", "NotResource", "Principal", "NotPrincipal"} {
				if _, ok := stmt[k]; ok {
					probs = append(probs, fmt.Sprintf("%s: %s is not allowed", where, k))
				}
			}
			actions := strs(stmt["Action"])
			if len(actions) == 0 {
				probs = append(probs, where+": no Action")
			}
			for _, a := range actions {
				if !allowedActions[a] {
					probs = append(probs, fmt.Sprintf("%s: action %q is not in the allow-list (no wildcards, no Scan)", where, a))
				}
			}
			resources := strs(stmt["Resource"])
			if len(resources) == 0 {
				probs = append(probs, where+": no Resource")
			}
			for _, r := range resources {
				g, err := resourceGrant(s, r)
				if err != nil {
					probs = append(probs, fmt.Sprintf("%s: %v", where, err))
					continue
				}
				if g.index != "" {
					for _, a := range actions {
						if a != "dynamodb:Query" {
							probs = append(probs, fmt.Sprintf("%s: index %s/%s with %s; grant only dynamodb:Query on indexes", where, g.table, g.index, a))
						}
					}
				}
				if out[g] == nil {
					out[g] = map[string]bool{}
				}
				for _, a := range actions {
					out[g][a] = true
				}
			}
		}
	}
	return out, probs
}

// resourceGrant accepts only !GetAtt <Table>.Arn and
// !Sub "${<Table>.Arn}/index/<GSI>" of tables and indexes in the template.
func resourceGrant(s *stack, r string) (grant, error) {
	if rest, ok := strings.CutPrefix(r, getAttMark); ok {
		table, ok := strings.CutSuffix(rest, ".Arn")
		if !ok || s.tables[table] == nil {
			return grant{}, fmt.Errorf("resource %q: want !GetAtt <Table>.Arn of a table in the template", r)
		}
		return grant{table: table}, nil
	}
	if rest, ok := strings.CutPrefix(r, subMark+"${"); ok {
		table, idx, ok := strings.Cut(rest, ".Arn}/index/")
		if !ok || s.tables[table] == nil {
			return grant{}, fmt.Errorf("resource %q: want !Sub \"${<Table>.Arn}/index/<GSI>\" of a table in the template", r)
		}
		for _, ix := range s.tables[table].GlobalSecondaryIndexes {
			if ix.IndexName == idx {
				return grant{table: table, index: idx}, nil
			}
		}
		return grant{}, fmt.Errorf("resource %q: %s has no GSI %q", r, table, idx)
	}
	return grant{}, fmt.Errorf("resource %q: only tables and indexes of the template, by !GetAtt / !Sub", r)
}

// envTables returns the tables whose names the function receives.
func envTables(s *stack, fn *serverless.Function) map[string]bool {
	out := map[string]bool{}
	for _, v := range s.env(fn) {
		if t, ok := strings.CutPrefix(v, refMark); ok && s.tables[t] != nil {
			out[t] = true
		}
	}
	return out
}

// (d) Every function's policy statements allow only listed DynamoDB actions
// (no "*", no dynamodb:*, no Scan) on only tables/indexes of this template
// (index ARNs only for Query), and the tables a function may touch are
// exactly the tables whose names it receives, but for the reviewed
// nameOnly entries, each of which must still be needed by the code.
func checkIAM(s *stack, f *codeFacts) []string {
	var probs []string
	if s.globalFn != nil && s.globalFn.Environment != nil {
		// covered below too (every function would receive it), named here
		// for a clearer message.
		for k, v := range s.globalFn.Environment.Variables {
			if t, ok := strings.CutPrefix(v, refMark); ok && s.tables[t] != nil {
				probs = append(probs, fmt.Sprintf("Globals.Function.Environment %s: table names are per function, not global", k))
			}
		}
	}
	for _, id := range sortedKeys(s.functions) {
		g, p := grants(s, id)
		probs = append(probs, p...)
		touched := map[string]bool{}
		for gr := range g {
			touched[gr.table] = true
		}
		named := envTables(s, s.functions[id])
		for _, t := range sortedKeys(touched) {
			if !named[t] {
				probs = append(probs, fmt.Sprintf("%s: may access %s but does not receive its name", id, t))
			}
		}
		for _, t := range sortedKeys(named) {
			if !touched[t] && !slices.Contains(nameOnly[id], t) {
				probs = append(probs, fmt.Sprintf("%s: receives the name of %s but has no access to it", id, t))
			}
		}
		for _, t := range nameOnly[id] {
			dir := strings.ToLower(strings.TrimSuffix(id, "Function"))
			envVar := f.tables[t].EnvVar
			switch {
			case touched[t]:
				probs = append(probs, fmt.Sprintf("nameOnly: %s may access %s; drop the entry or the access", id, t))
			case !strings.Contains(f.mains[dir], `"`+envVar+`"`):
				probs = append(probs, fmt.Sprintf("nameOnly: functions/%s no longer names %s; drop it from %s's environment and from nameOnly", dir, envVar, id))
			case !named[t]:
				probs = append(probs, fmt.Sprintf("%s: functions/%s requires %s but does not receive it", id, dir, envVar))
			}
		}
	}
	for _, id := range sortedKeys(nameOnly) {
		if s.functions[id] == nil {
			probs = append(probs, fmt.Sprintf("nameOnly: %s is not a function of the template", id))
		}
	}
	return probs
}

// (d) The grants equal the reviewed per-function contract (wantGrants).
func checkGrantContract(s *stack, _ *codeFacts) []string {
	var probs []string
	for _, id := range sortedKeys(s.functions) {
		want, ok := wantGrants[id]
		if !ok {
			probs = append(probs, fmt.Sprintf("%s: not in wantGrants; review the DynamoDB calls its code makes and add it", id))
			continue
		}
		got, _ := grants(s, id)
		gotBy := map[string][]string{}
		for gr, actions := range got {
			key := gr.table
			if gr.index != "" {
				key += "/index/" + gr.index
			}
			for a := range actions {
				gotBy[key] = append(gotBy[key], a)
			}
		}
		for _, k := range sortedKeys(gotBy) {
			sort.Strings(gotBy[k])
		}
		wantBy := map[string][]string{}
		for k, v := range want {
			wantBy[k] = slices.Sorted(slices.Values(v))
		}
		for _, k := range sortedKeys(wantBy) {
			if !slices.Equal(gotBy[k], wantBy[k]) {
				probs = append(probs, fmt.Sprintf("%s on %s: grants %v, want %v", id, k, gotBy[k], wantBy[k]))
			}
		}
		for _, k := range sortedKeys(gotBy) {
			if _, ok := wantBy[k]; !ok {
				probs = append(probs, fmt.Sprintf("%s on %s: grants %v, want none", id, k, gotBy[k]))
			}
		}
	}
	for _, id := range sortedKeys(wantGrants) {
		if s.functions[id] == nil {
			probs = append(probs, fmt.Sprintf("wantGrants: %s is not a function of the template", id))
		}
	}
	return probs
}

// (e) A function's env var that names a table is that table's store EnvVar
// (the name config.Load reads), and a store EnvVar always holds !Ref of its
// own table.
func checkTableEnv(s *stack, f *codeFacts) []string {
	var probs []string
	byEnv := map[string]store.Table{}
	for _, t := range f.tables {
		byEnv[t.EnvVar] = t
	}
	for _, id := range sortedKeys(s.functions) {
		env := s.env(s.functions[id])
		for _, k := range sortedKeys(env) {
			v := env[k]
			if t, ok := strings.CutPrefix(v, refMark); ok {
				if def, isTable := f.tables[t]; isTable && def.EnvVar != k {
					probs = append(probs, fmt.Sprintf("%s: %s = !Ref %s; that table's variable is %s", id, k, t, def.EnvVar))
				}
			}
			if def, isTableVar := byEnv[k]; isTableVar && v != refMark+def.LogicalID {
				probs = append(probs, fmt.Sprintf("%s: %s = %q, want !Ref %s", id, k, v, def.LogicalID))
			}
		}
	}
	return probs
}

// (f) The template header, and the outputs: ApiUrl (the HTTP API's URL)
// and each table's name.
func checkOutputs(s *stack, f *codeFacts) []string {
	var probs []string
	if s.tmpl.AWSTemplateFormatVersion != "2010-09-09" {
		probs = append(probs, fmt.Sprintf("AWSTemplateFormatVersion %q, want 2010-09-09", s.tmpl.AWSTemplateFormatVersion))
	}
	if tr := s.raw["Transform"]; tr != "AWS::Serverless-2016-10-31" {
		probs = append(probs, fmt.Sprintf("Transform %v, want AWS::Serverless-2016-10-31", tr))
	}
	api, ok := s.tmpl.Outputs["ApiUrl"]
	if !ok {
		probs = append(probs, "Outputs: no ApiUrl")
	} else if v := fmt.Sprint(api.Value); !strings.HasPrefix(v, subMark+"https://${"+httpAPIID+"}.execute-api.") {
		probs = append(probs, fmt.Sprintf("Outputs.ApiUrl = %q, want !Sub https://${%s}.execute-api.${AWS::Region}.${AWS::URLSuffix}", v, httpAPIID))
	}
	outputRefs := map[string]bool{}
	for _, o := range s.tmpl.Outputs {
		if v, ok := o.Value.(string); ok {
			outputRefs[v] = true
		}
	}
	for _, id := range sortedKeys(f.tables) {
		if !outputRefs[refMark+id] {
			probs = append(probs, fmt.Sprintf("Outputs: no output with the name of %s (!Ref %s)", id, id))
		}
	}
	return probs
}

// (g) CORS at the gateway agrees with the functions: origins from the
// AllowedOrigins parameter (which also feeds ALLOWED_ORIGINS), credentials
// allowed, every routed method allowed, the headers the middleware uses.
func checkCORS(s *stack, _ *codeFacts) []string {
	var probs []string
	if _, ok := s.tmpl.Parameters["AllowedOrigins"]; !ok {
		probs = append(probs, "Parameters: no AllowedOrigins")
	}
	if s.globalFn == nil || s.globalFn.Environment == nil || s.globalFn.Environment.Variables["ALLOWED_ORIGINS"] != refMark+"AllowedOrigins" {
		probs = append(probs, "Globals.Function.Environment: ALLOWED_ORIGINS must be !Ref AllowedOrigins")
	}
	cors := asMap(asMap(s.resources()[httpAPIID]["Properties"])["CorsConfiguration"])
	if cors == nil {
		return append(probs, httpAPIID+": no CorsConfiguration object (with AllowedOrigins non-empty)")
	}
	lower := func(v any) []string {
		out := strs(v)
		for i := range out {
			out[i] = strings.ToLower(out[i])
		}
		return out
	}
	if origins := strs(cors["AllowOrigins"]); !slices.Equal(origins, []string{refMark + "AllowedOrigins"}) {
		probs = append(probs, fmt.Sprintf("CorsConfiguration.AllowOrigins %v, want !Split [\",\", !Ref AllowedOrigins]", origins))
	}
	if cors["AllowCredentials"] != true {
		probs = append(probs, "CorsConfiguration.AllowCredentials must be true (session cookie)")
	}
	methods := map[string]bool{}
	for _, m := range strs(cors["AllowMethods"]) {
		methods[strings.ToUpper(m)] = true
	}
	if methods["*"] {
		probs = append(probs, "CorsConfiguration.AllowMethods: list the methods, not *")
	}
	for _, id := range sortedKeys(s.functions) {
		for _, ev := range httpAPIEvents(s.functions[id]) {
			if m := strings.ToUpper(deref(ev.Method)); m != "" && !methods[m] {
				probs = append(probs, fmt.Sprintf("CorsConfiguration.AllowMethods lacks %s (routed to %s)", m, id))
			}
		}
	}
	headers := lower(cors["AllowHeaders"])
	for _, h := range []string{"content-type", "x-request-id"} {
		if !slices.Contains(headers, h) {
			probs = append(probs, fmt.Sprintf("CorsConfiguration.AllowHeaders lacks %s", h))
		}
	}
	expose := lower(cors["ExposeHeaders"])
	for _, h := range []string{"x-request-id", "retry-after"} {
		if !slices.Contains(expose, h) {
			probs = append(probs, fmt.Sprintf("CorsConfiguration.ExposeHeaders lacks %s", h))
		}
	}
	return probs
}

// (h) A function without HttpApi events is reached through a function URL
// with AuthType NONE (the service key or session cookie is checked in
// code; callers do not sign requests). The tool server (McpFunction) is
// such a function, BUFFERED, with a timeout above a tool's 30 s and the
// key. Every function whose main names MCP_URL / MCP_SERVICE_KEY receives
// !GetAtt McpFunctionUrl.FunctionUrl / !Ref MCPServiceKey, and no other
// value; the key is a NoEcho parameter of at least 16 characters, per
// function (not global), and no output reveals it; ToolServerUrl outputs
// the URL.
func checkFunctionURLs(s *stack, f *codeFacts) []string {
	var probs []string
	for _, id := range sortedKeys(s.functions) {
		fn := s.functions[id]
		url := fn.FunctionUrlConfig
		if len(httpAPIEvents(fn)) == 0 && url == nil && len(scheduleEvents(fn)) == 0 && id != runnerID && id != fireID && id != knowledgeIndexID {
			probs = append(probs, fmt.Sprintf("%s: neither HttpApi events, a FunctionUrlConfig nor a Schedule; nothing can reach it", id))
		}
		if url != nil && url.AuthType != "NONE" {
			probs = append(probs, fmt.Sprintf("%s: FunctionUrlConfig.AuthType %q, want NONE (credentials are checked in code; callers do not sign requests)", id, url.AuthType))
		}
	}

	if mcp := s.functions[toolServerID]; mcp == nil {
		probs = append(probs, toolServerID+": not in the template (the tool server, functions/mcp)")
	} else {
		if len(httpAPIEvents(mcp)) > 0 {
			probs = append(probs, toolServerID+": has HttpApi events; the tool server is served by its function URL only")
		}
		if url := mcp.FunctionUrlConfig; url != nil && deref(url.InvokeMode) != "" && deref(url.InvokeMode) != "BUFFERED" {
			probs = append(probs, fmt.Sprintf("%s: FunctionUrlConfig.InvokeMode %q, want BUFFERED (JSON responses)", toolServerID, deref(url.InvokeMode)))
		}
		timeout := deref(mcp.Timeout)
		if timeout == 0 && s.globalFn != nil {
			timeout = deref(s.globalFn.Timeout)
		}
		if timeout < minToolServerTimeout {
			probs = append(probs, fmt.Sprintf("%s: Timeout %d, want at least %d s (a tool may run 30 s)", toolServerID, timeout, minToolServerTimeout))
		}
		if s.env(mcp)["MCP_SERVICE_KEY"] == "" {
			probs = append(probs, toolServerID+": no MCP_SERVICE_KEY")
		}
		// The function's memory must hold its sandbox as the bootstrap
		// sizes it, or it refuses to start.
		mem := deref(mcp.MemorySize)
		if mem == 0 && s.globalFn != nil {
			mem = deref(s.globalFn.MemorySize)
		}
		vars := map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(max(mem, 128))}
		if v := s.env(mcp)["SANDBOX_PER_USER"]; v != "" {
			vars["SANDBOX_PER_USER"] = v
		}
		cfg, err := config.Load(func(k string) string { return vars[k] })
		if err == nil {
			_, err = mcpfn.SandboxSize(cfg)
		}
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s: MemorySize %d does not hold its sandbox: %v", toolServerID, mem, err))
		}
	}

	if s.globalFn != nil && s.globalFn.Environment != nil {
		for _, k := range []string{"MCP_SERVICE_KEY", "MCP_URL"} {
			if _, ok := s.globalFn.Environment.Variables[k]; ok {
				probs = append(probs, fmt.Sprintf("Globals.Function.Environment %s: per function, only where the code needs it", k))
			}
		}
	}
	for _, id := range sortedKeys(s.functions) {
		env := s.env(s.functions[id])
		if v, ok := env["MCP_URL"]; ok && v != toolServerURL {
			probs = append(probs, fmt.Sprintf("%s: MCP_URL = %q, want !GetAtt %sUrl.FunctionUrl", id, v, toolServerID))
		}
		if v, ok := env["MCP_SERVICE_KEY"]; ok && v != refMark+serviceKeyParam {
			probs = append(probs, fmt.Sprintf("%s: MCP_SERVICE_KEY = %q, want !Ref %s", id, v, serviceKeyParam))
		}
		dir := strings.ToLower(strings.TrimSuffix(id, "Function"))
		for _, k := range []string{"MCP_URL", "MCP_SERVICE_KEY"} {
			if strings.Contains(f.mains[dir], `"`+k+`"`) && env[k] == "" {
				probs = append(probs, fmt.Sprintf("%s: functions/%s needs %s but does not receive it", id, dir, k))
			}
		}
	}

	param := asMap(asMap(s.raw["Parameters"])[serviceKeyParam])
	if param == nil {
		probs = append(probs, "Parameters: no "+serviceKeyParam)
	} else {
		if param["NoEcho"] != true {
			probs = append(probs, serviceKeyParam+": NoEcho must be true (the key is a secret)")
		}
		if n, _ := param["MinLength"].(float64); n < 16 {
			probs = append(probs, fmt.Sprintf("%s: MinLength %v, want at least 16 (config.Load refuses shorter keys)", serviceKeyParam, param["MinLength"]))
		}
	}
	for _, name := range sortedKeys(s.tmpl.Outputs) {
		if v := fmt.Sprint(s.tmpl.Outputs[name].Value); strings.Contains(v, serviceKeyParam) {
			probs = append(probs, fmt.Sprintf("Outputs.%s reveals the service key (%s)", name, v))
		}
	}
	if o, ok := s.tmpl.Outputs["ToolServerUrl"]; !ok || fmt.Sprint(o.Value) != toolServerURL {
		probs = append(probs, fmt.Sprintf("Outputs: no ToolServerUrl = !GetAtt %sUrl.FunctionUrl", toolServerID))
	}
	return probs
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

func loadTemplate(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func loadFacts(t *testing.T) *codeFacts {
	t.Helper()
	f, err := facts()
	if err != nil {
		t.Fatalf("reading the code side (functions/, Makefile, infra/local): %v", err)
	}
	return f
}

func TestTemplate(t *testing.T) {
	t.Parallel()
	s, err := parse(loadTemplate(t))
	if err != nil {
		t.Fatalf("parse template.yaml: %v", err)
	}
	if len(s.functions) == 0 || len(s.tables) == 0 {
		t.Fatalf("parsed %d functions and %d tables; the parse lost them", len(s.functions), len(s.tables))
	}
	f := loadFacts(t)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, p := range c.fn(s, f) {
				t.Error(p)
			}
		})
	}
}

// brokenCase is one way to break template.yaml and what the named check
// must then report.
type brokenCase struct {
	name, check string
	old, new    string // the first occurrence of old in template.yaml becomes new
	want        string // a substring of one reported problem
}

// TestChecksCatchBrokenTemplates breaks template.yaml in memory, one way per
// case, and requires the named check to report it: a check that cannot
// fail checks nothing.
func TestChecksCatchBrokenTemplates(t *testing.T) {
	t.Parallel()
	cases := []brokenCase{
		{"the Globals' memory drifts from the table", "s_memory_sizes",
			"    MemorySize: 128\n", "    MemorySize: 256\n", "MemorySize 256, but costmodel.Memory says 128"},
		{"a function's own memory drifts from the table", "s_memory_sizes",
			"      MemorySize: 1024\n", "      MemorySize: 512\n", "AuthFunction: MemorySize 512, but costmodel.Memory says 1024"},
		{"function renamed away from its folder", "a_functions_match_folders",
			"  HealthFunction:\n", "  LivenessFunction:\n", "functions/health: no AWS::Serverless::Function"},
		{"wrong runtime", "a_functions_match_folders",
			"Runtime: provided.al2023", "Runtime: provided.al2", "want provided.al2023"},
		{"x86 build", "a_functions_match_folders",
			"Architectures: [arm64]", "Architectures: [x86_64]", "want [arm64]"},
		{"not built by the Makefile", "a_functions_match_folders",
			"Metadata:\n      BuildMethod: makefile", "Metadata:\n      BuildMethod: go1.x", "want makefile"},
		{"route path drifts from the router", "b_routes_match_routers",
			"Path: /api/models\n", "Path: /api/model\n", "route GET /api/models is registered by its router but has no HttpApi event"},
		{"route method drifts from the router", "b_routes_match_routers",
			"Method: GET\n            Path: /api/auth/session", "Method: POST\n            Path: /api/auth/session", "HttpApi event POST /api/auth/session is not registered"},
		{"route on another API", "b_routes_match_routers",
			"ApiId: !Ref HttpApi", "ApiId: !Ref OtherApi", "want !Ref HttpApi"},
		{"TTL attribute drifts", "c_tables_match_store",
			"AttributeName: expiresAt", "AttributeName: expires", `want enabled on "expiresAt"`},
		{"GSI projection not ALL", "c_tables_match_store",
			"ProjectionType: ALL", "ProjectionType: KEYS_ONLY", "SessionsTable: GSI UserSessions"},
		{"range key dropped", "c_tables_match_store",
			"        - AttributeName: SK\n          KeyType: RANGE\n", "", "DataTable: KeySchema"},
		{"provisioned billing", "c_tables_match_store",
			"BillingMode: PAY_PER_REQUEST", "BillingMode: PROVISIONED", "BillingMode"},
		{"table missing from the Go definitions", "c_tables_match_store",
			"  DataTable:\n", "  ExtraTable:\n", "ExtraTable: table not defined in shared/store"},
		{"table not retained", "c_tables_match_store",
			"  UsersTable:\n    Type: AWS::DynamoDB::Table\n    DeletionPolicy: Retain", "  UsersTable:\n    Type: AWS::DynamoDB::Table\n    DeletionPolicy: Delete", "want Retain / Retain"},
		{"Scan granted", "d_iam_least_privilege",
			"Action: [dynamodb:UpdateItem]", "Action: [dynamodb:UpdateItem, dynamodb:Scan]", `"dynamodb:Scan" is not in the allow-list`},
		{"wildcard action", "d_iam_least_privilege",
			"Action: [dynamodb:UpdateItem]", "Action: [\"dynamodb:*\"]", `"dynamodb:*" is not in the allow-list`},
		{"wildcard resource", "d_iam_least_privilege",
			"Resource: [!GetAtt UsersTable.Arn]", "Resource: [\"*\"]", `resource "*"`},
		{"access to a table whose name it does not receive", "d_iam_least_privilege",
			"              Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt UsersTable.Arn]",
			"              Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt UsersTable.Arn, !GetAtt DataTable.Arn]", "may access DataTable but does not receive its name"},
		{"table name received without access", "d_iam_least_privilege",
			"      Description: Model list and model preferences\n      CodeUri: .\n      Environment:\n        Variables:\n",
			"      Description: Model list and model preferences\n      CodeUri: .\n      Environment:\n        Variables:\n          DATA_TABLE: !Ref DataTable\n", "receives the name of DataTable but has no access"},
		{"non-Query action on an index", "d_iam_least_privilege",
			"Resource: [!GetAtt UsersTable.Arn]", "Resource: [!GetAtt UsersTable.Arn, !Sub \"${DataTable.Arn}/index/GSI1\"]", "grant only dynamodb:Query on indexes"},
		{"managed policy", "d_iam_least_privilege",
			"      Policies:\n", "      Policies:\n        - AmazonDynamoDBFullAccess\n", "is not an inline policy document"},
		{"more than the code performs", "d_iam_reviewed_contract",
			"Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt UsersTable.Arn]\n            # The auth middleware reads the session and renews it.\n            - Sid: Sessions\n              Effect: Allow\n              Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt SessionsTable.Arn]\n" + xrayBlock + "      Events:\n        ListModels:",
			"Action: [dynamodb:GetItem, dynamodb:UpdateItem, dynamodb:DeleteItem]\n              Resource: [!GetAtt UsersTable.Arn]\n            # The auth middleware reads the session and renews it.\n            - Sid: Sessions\n              Effect: Allow\n              Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt SessionsTable.Arn]\n" + xrayBlock + "      Events:\n        ListModels:",
			"ModelsFunction on UsersTable"},
		{"table env var misnamed", "e_table_env_vars",
			"USERS_TABLE: !Ref UsersTable", "USER_TABLE: !Ref UsersTable", "that table's variable is USERS_TABLE"},
		{"table env var points at another table", "e_table_env_vars",
			"USERS_TABLE: !Ref UsersTable", "USERS_TABLE: !Ref SessionsTable", "want !Ref UsersTable"},
		{"signing secret read by every resource", "p_signing_key_secret",
			"Action: [secretsmanager:GetSecretValue]\n              Resource: [!Ref OAuthSigningKeySecret]", "Action: [secretsmanager:GetSecretValue]\n              Resource: [\"*\"]", "want secretsmanager:GetSecretValue alone on !Ref OAuthSigningKeySecret"},
		{"signing secret also deletable", "p_signing_key_secret",
			"Action: [secretsmanager:GetSecretValue]", "Action: [secretsmanager:GetSecretValue, secretsmanager:DeleteSecret]", "want secretsmanager:GetSecretValue alone"},
		{"gateway reads another secret", "p_signing_key_secret",
			"          OAUTH_TABLE: !Ref OAuthTable\n          OAUTH_SIGNING_SECRET: !Ref OAuthSigningKeySecret\n          # A tools/call",
			"          OAUTH_TABLE: !Ref OAuthTable\n          OAUTH_SIGNING_SECRET: other-secret\n          # A tools/call",
			`McpGatewayFunction: OAUTH_SIGNING_SECRET = "other-secret", want !Ref OAuthSigningKeySecret`},
		{"MCP behaviour without the viewer's host", "q_viewer_host",
			"            TargetOriginId: McpGatewayFunctionUrl\n" + behaviourBody + "            Compress: false\n            FunctionAssociations:\n              - EventType: viewer-request\n                FunctionARN: !GetAtt ViewerHostFunction.FunctionMetadata.FunctionARN\n",
			"            TargetOriginId: McpGatewayFunctionUrl\n" + behaviourBody + "            Compress: false\n", "behaviour 2 (/api/mcp) does not run ViewerHostFunction"},
		{"viewer host from the wrong header", "q_viewer_host",
			"request.headers.host.value", "request.headers.origin.value", "setting x-viewer-host from the Host header"},
		{"signing secret not retained", "p_signing_key_secret",
			"  OAuthSigningKeySecret:\n    Type: AWS::SecretsManager::Secret\n    DeletionPolicy: Retain", "  OAuthSigningKeySecret:\n    Type: AWS::SecretsManager::Secret\n    DeletionPolicy: Delete", "want Retain"},
		{"rate-limit windows never expire", "c_tables_match_store",
			"      TimeToLiveSpecification:\n        AttributeName: expiresAt\n        Enabled: true\n      PointInTimeRecoverySpecification:\n        PointInTimeRecoveryEnabled: true\n      SSESpecification:\n        SSEEnabled: true\n\nOutputs:",
			"      PointInTimeRecoverySpecification:\n        PointInTimeRecoveryEnabled: true\n      SSESpecification:\n        SSEEnabled: true\n\nOutputs:",
			`RateLimitsTable: TimeToLiveSpecification <nil>, want enabled on "expiresAt"`},
		{"rate limiter without its grant", "d_iam_least_privilege",
			"            - Sid: RateLimits\n              Effect: Allow\n              Action: [dynamodb:UpdateItem]\n              Resource: [!GetAtt RateLimitsTable.Arn]\n", "",
			"ChatsFunction: receives the name of RateLimitsTable but has no access"},
		{"rate limiter granted reads", "d_iam_reviewed_contract",
			"Action: [dynamodb:UpdateItem]\n              Resource: [!GetAtt RateLimitsTable.Arn]", "Action: [dynamodb:UpdateItem, dynamodb:GetItem]\n              Resource: [!GetAtt RateLimitsTable.Arn]",
			"ChatsFunction on RateLimitsTable"},
		{"no ApiUrl output", "f_header_and_outputs",
			"  ApiUrl:\n", "  RestUrl:\n", "no ApiUrl"},
		{"no table name output", "f_header_and_outputs",
			"    Value: !Ref DataTable\n", "    Value: data\n", "no output with the name of DataTable"},
		{"CORS without credentials", "g_cors",
			"AllowCredentials: true", "AllowCredentials: false", "AllowCredentials must be true"},
		{"CORS lacks a routed method", "g_cors",
			"AllowMethods: [GET, POST, PUT, PATCH, DELETE, OPTIONS]", "AllowMethods: [GET, PUT, PATCH, DELETE, OPTIONS]", "lacks POST"},
		{"sweeper on a slow schedule", "l_sweeper_schedule",
			"Schedule: rate(1 minute)", "Schedule: rate(1 hour)", `runs on "rate(1 hour)"`},
		{"sweeper reachable over HTTP", "l_sweeper_schedule",
			"            Schedule: rate(1 minute)\n            Description: End streamed replies whose lease expired\n",
			"            Schedule: rate(1 minute)\n            Description: End streamed replies whose lease expired\n      FunctionUrlConfig:\n        AuthType: NONE\n",
			"must not be reachable over HTTP"},
		{"runner invoke on every function", "m_runner_invokes",
			"Resource: [!GetAtt RunnerFunction.Arn]", `Resource: ["*"]`, "want lambda:InvokeFunction alone"},
		{"alarm without its OK notification", "n_alarms",
			"      OKActions: !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref AWS::NoValue]\n", "", "RunnerDeadLetterAlarm: OKActions"},
		{"alarm to a fixed topic", "n_alarms",
			"      AlarmActions: !If [HasAlarmTopic, [!Ref AlarmTopicArn], !Ref AWS::NoValue]\n", "      AlarmActions: [arn:aws:sns:us-east-1:123456789012:ops]\n", "RunnerDeadLetterAlarm: AlarmActions"},
		{"dead-letter alarm on another metric", "n_alarms",
			"MetricName: ApproximateNumberOfMessagesVisible", "MetricName: NumberOfMessagesSent", "the runner's dead-letter queue"},
		{"dead-letter alarm tolerates messages", "n_alarms",
			"      Statistic: Maximum\n      Period: 300\n      EvaluationPeriods: 1\n      Threshold: 0\n", "      Statistic: Maximum\n      Period: 300\n      EvaluationPeriods: 1\n      Threshold: 10\n", "want GreaterThanThreshold 0"},
		{"HTTP API 5xx alarm on 4xx", "n_alarms",
			"MetricName: 5xx", "MetricName: 4xx", "HttpApi: no 5xx-rate alarm"},
		{"function URL without its 5xx alarm", "n_alarms",
			"              MetricName: Url5xxCount\n              Dimensions:\n                - Name: FunctionName\n                  Value: !Ref McpFunction\n",
			"              MetricName: Url5xxCount\n              Dimensions:\n                - Name: FunctionName\n                  Value: !Ref StreamFunction\n", "McpFunction: no 5xx-rate alarm on its function URL"},
		{"function without a throttles alarm", "n_alarms",
			"      MetricName: Throttles\n      Dimensions:\n        - Name: FunctionName\n          Value: !Ref HealthFunction\n",
			"      MetricName: Throttles\n      Dimensions:\n        - Name: FunctionName\n          Value: !Ref AuthFunction\n", "HealthFunction: no Throttles alarm"},
		{"function without an errors alarm", "n_alarms",
			"      MetricName: Errors\n      Dimensions:\n        - Name: FunctionName\n          Value: !Ref RunnerFunction\n",
			"      MetricName: Errors\n      Dimensions:\n        - Name: FunctionName\n          Value: !Ref SweeperFunction\n", "RunnerFunction: no Errors alarm"},
		{"interrupted jobs metric renamed", "n_alarms",
			"MetricName: InterruptedJobs", "MetricName: InterruptedJob", "no alarm on the interrupted jobs"},
		{"interrupted jobs per minute", "n_alarms",
			"      Period: 3600\n", "      Period: 60\n", "want the Sum per hour"},
		{"sweeper too quiet for its metric", "n_alarms",
			"LOG_LEVEL: !If [DebugLogs, debug, info]", "LOG_LEVEL: warn", "carries the interrupted jobs"},
		{"runner failures dropped", "m_runner_invokes",
			"            Type: SQS\n", "            Type: SNS\n", "want Type SQS"},
		{"runner named in the wrong function", "m_runner_invokes",
			"          KNOWLEDGE_EMBEDDER: !Ref KnowledgeEmbedder\n      EventInvokeConfig:",
			"          KNOWLEDGE_EMBEDDER: !Ref KnowledgeEmbedder\n          RUNNER_FUNCTION: !Ref RunnerFunction\n      EventInvokeConfig:",
			"RUNNER_FUNCTION"},
		{"sweeper granted a Scan", "d_iam_least_privilege",
			"Action: [dynamodb:GetItem, dynamodb:Query, dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:ConditionCheckItem]", "Action: [dynamodb:GetItem, dynamodb:Query, dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:ConditionCheckItem, dynamodb:Scan]", "dynamodb:Scan"},
		{"tool server granted storage", "d_iam_reviewed_contract",
			"        # llm_generate may run on a Bedrock model", "        - Statement:\n            - Effect: Allow\n              Action: [dynamodb:GetItem]\n              Resource: [!GetAtt SessionsTable.Arn]\n        # llm_generate may run on a Bedrock model", "McpFunction on SessionsTable"},
		{"tool server unreachable", "h_function_urls_and_tool_server",
			"      FunctionUrlConfig:\n        AuthType: NONE\n        InvokeMode: BUFFERED\n", "", "McpFunction: neither HttpApi events, a FunctionUrlConfig nor a Schedule"},
		{"tool server URL needs signed requests", "h_function_urls_and_tool_server",
			"      FunctionUrlConfig:\n        AuthType: NONE", "      FunctionUrlConfig:\n        AuthType: AWS_IAM", "AuthType \"AWS_IAM\""},
		{"tool server streams", "h_function_urls_and_tool_server",
			"InvokeMode: BUFFERED", "InvokeMode: RESPONSE_STREAM", "want BUFFERED"},
		{"tool server too small for its sandbox", "h_function_urls_and_tool_server",
			"      MemorySize: 768\n      Timeout: 40\n", "      MemorySize: 512\n      Timeout: 40\n", "MemorySize 512 does not hold its sandbox"},
		{"tool server times out before its tools", "h_function_urls_and_tool_server",
			"      Timeout: 40\n", "      Timeout: 30\n", "want at least 31"},
		{"MCP_URL not the tool server's URL", "h_function_urls_and_tool_server",
			"MCP_URL: !GetAtt McpFunctionUrl.FunctionUrl", "MCP_URL: https://tools.example.com", "MCP_URL = \"https://tools.example.com\""},
		{"caller without the key", "h_function_urls_and_tool_server",
			"          MCP_URL: !GetAtt McpFunctionUrl.FunctionUrl\n          MCP_SERVICE_KEY: !Ref MCPServiceKey\n", "          MCP_URL: !GetAtt McpFunctionUrl.FunctionUrl\n", "functions/tools needs MCP_SERVICE_KEY"},
		{"caller without the URL", "h_function_urls_and_tool_server",
			"          MCP_URL: !GetAtt McpFunctionUrl.FunctionUrl\n", "", "functions/tools needs MCP_URL"},
		{"key given to every function", "h_function_urls_and_tool_server",
			"        LOG_FORMAT: json\n", "        LOG_FORMAT: json\n        MCP_SERVICE_KEY: !Ref MCPServiceKey\n", "Globals.Function.Environment MCP_SERVICE_KEY"},
		{"key echoed", "h_function_urls_and_tool_server",
			"    NoEcho: true\n", "    NoEcho: false\n", "NoEcho must be true"},
		{"short key allowed", "h_function_urls_and_tool_server",
			"    MinLength: 16\n", "    MinLength: 8\n", "MinLength 8"},
		{"key in an output", "h_function_urls_and_tool_server",
			"Outputs:\n", "Outputs:\n  Key:\n    Value: !Ref MCPServiceKey\n", "Outputs.Key reveals the service key"},
		{"no ToolServerUrl output", "h_function_urls_and_tool_server",
			"  ToolServerUrl:\n", "  McpUrl:\n", "no ToolServerUrl"},

		// WorkflowsFunction, and the workflow runs of the stream.
		{"workflow run route missing", "b_routes_match_routers",
			"Path: /api/chats/{chatId}/workflow-runs/{runId}/cancel\n", "Path: /api/chats/{chatId}/workflow-runs/{runId}/stop\n",
			"WorkflowsFunction: route POST /api/chats/{chatId}/workflow-runs/{runId}/cancel is registered by its router but has no HttpApi event"},
		{"synchronous runs outlive the HTTP API", "b_routes_match_routers",
			"      Timeout: 30\n      Environment:\n        Variables:\n          # The budget check and the usage of proposals",
			"      Timeout: 120\n      Environment:\n        Variables:\n          # The budget check and the usage of proposals",
			"WorkflowsFunction: Timeout 120 s behind the HTTP API"},
		{"workflow messages cannot check their workflow", "d_iam_reviewed_contract",
			"                - dynamodb:ConditionCheckItem\n                - dynamodb:Query\n                - dynamodb:BatchWriteItem\n              Resource: [!GetAtt DataTable.Arn]\n            # The deleted workflow's schedule triggers",
			"                - dynamodb:Query\n                - dynamodb:BatchWriteItem\n              Resource: [!GetAtt DataTable.Arn]\n            # The deleted workflow's schedule triggers", "WorkflowsFunction on DataTable"},
		{"attachments cannot check their chat", "d_iam_reviewed_contract",
			"                - dynamodb:ConditionCheckItem\n", "", "ChatsFunction on DataTable"},
		{"workflow listing without the index", "d_iam_reviewed_contract",
			"            # chat's runs (ChatRunsPage): a Query of GSI2. Query only, on\n            # the indexes.\n            - Sid: DataIndexes\n              Effect: Allow\n              Action: [dynamodb:Query]\n              Resource: [!Sub \"${DataTable.Arn}/index/GSI1\", !Sub \"${DataTable.Arn}/index/GSI2\"]\n",
			"            # chat's runs (ChatRunsPage): a Query of GSI2. Query only, on\n            # the indexes.\n            - Sid: DataIndexes\n              Effect: Allow\n              Action: [dynamodb:Query]\n              Resource: [!Sub \"${DataTable.Arn}/index/GSI2\"]\n",
			"WorkflowsFunction on DataTable/index/GSI1: grants [], want [dynamodb:Query]"},
		{"workflows cannot record a proposal's usage", "d_iam_reviewed_contract",
			"            # (UpdateItem ADD); the gate reads the tool policies (GetItem on\n            # TOOLPOLICY#).\n            - Sid: Users\n              Effect: Allow\n              Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt UsersTable.Arn]\n            # The auth middleware reads the session and renews it.\n            - Sid: Sessions\n              Effect: Allow\n              Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt SessionsTable.Arn]\n            # runstart.LambdaInvoker",
			"            # (UpdateItem ADD); the gate reads the tool policies (GetItem on\n            # TOOLPOLICY#).\n            - Sid: Users\n              Effect: Allow\n              Action: [dynamodb:GetItem]\n              Resource: [!GetAtt UsersTable.Arn]\n            # The auth middleware reads the session and renews it.\n            - Sid: Sessions\n              Effect: Allow\n              Action: [dynamodb:GetItem, dynamodb:UpdateItem]\n              Resource: [!GetAtt SessionsTable.Arn]\n            # runstart.LambdaInvoker",
			"WorkflowsFunction on UsersTable"},
		{"workflows without the table name its main requires", "d_iam_least_privilege",
			"          USERS_TABLE: !Ref UsersTable\n          SESSIONS_TABLE: !Ref SessionsTable\n          DATA_TABLE: !Ref DataTable\n          # The blob store (shared/blob over S3; docs/deploy.md, Blobs).\n          BLOB_BUCKET: !Ref BlobBucket\n          # Per-user rate limits of POST /api/workflows",
			"          SESSIONS_TABLE: !Ref SessionsTable\n          DATA_TABLE: !Ref DataTable\n          # The blob store (shared/blob over S3; docs/deploy.md, Blobs).\n          BLOB_BUCKET: !Ref BlobBucket\n          # Per-user rate limits of POST /api/workflows",
			"WorkflowsFunction: may access UsersTable but does not receive its name"},
		{"stream cannot record a workflow run", "d_iam_reviewed_contract",
			"Action: [dynamodb:Query, dynamodb:GetItem, dynamodb:PutItem, dynamodb:UpdateItem, dynamodb:ConditionCheckItem]",
			"Action: [dynamodb:Query, dynamodb:GetItem, dynamodb:PutItem, dynamodb:UpdateItem]", "StreamFunction on DataTable"},
		{"stream granted the index it never queries", "d_iam_reviewed_contract",
			"            # The rate limiter: one atomic counter UpdateItem (ADD) per\n            # stream",
			"            - Effect: Allow\n              Action: [dynamodb:Query]\n              Resource: [!Sub \"${DataTable.Arn}/index/GSI1\"]\n            # The rate limiter: one atomic counter UpdateItem (ADD) per\n            # stream",
			"StreamFunction on DataTable/index/GSI1: grants [dynamodb:Query], want none"},
		{"workflow assistant without Bedrock", "k_model_providers",
			"        # The workflow assistant generates with the configured models:\n        # the same conditional Bedrock policy as ChatsFunction.\n" + bedrockBlock, "",
			"WorkflowsFunction: in wantBedrock but has no Bedrock permission"},
	}
	cases = append(cases, edgeCases...)
	cases = append(cases, triggerCases...)
	cases = append(cases, blobCases...)
	cases = append(cases, tracingCases...)
	runBrokenCases(t, cases, nil)
}

// behaviourBody is the lines of a CloudFront cache behaviour of the
// template between its TargetOriginId and its Compress.
const behaviourBody = "            ViewerProtocolPolicy: redirect-to-https\n" +
	"            AllowedMethods: [GET, HEAD, OPTIONS, PUT, PATCH, POST, DELETE]\n" +
	"            CachedMethods: [GET, HEAD]\n" +
	"            CachePolicyId: 4135ea2d-6df8-44a3-9df3-4b5a84be39ad # managed CachingDisabled\n" +
	"            OriginRequestPolicyId: b689b0a8-53d0-40ab-baf2-68738e2966ac # managed AllViewerExceptHostHeader\n"
