package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/job"
	"github.com/workflowchat/service/shared/knowledge"
	"github.com/workflowchat/service/shared/paging"
)

// Knowledge stores knowledge bases and their documents in the Data table.
// It implements knowledge.Store.
//
//   - The knowledge base: PK USER#<uid>, SK KB#<kbId> (ids are UUIDv7,
//     so a Query of the user's KB# items lists them oldest first), with
//     documentCount and chunkCount, changed in the transactions that add,
//     finish and delete documents (conditioned on the limits).
//   - The user's counter: PK USER#<uid>, SK COUNTER#KNOWLEDGE_BASES, n,
//     changed with the knowledge bases (creation conditioned on n <
//     the cap).
//   - A document: PK KB#<kbId>, SK DOC#<docId>, with its status and
//     attempt; its indexing job's log head (job kind knowledge_index) in
//     the same collection, STREAM#<docId>#~, active with a lease while
//     indexing, so the sweeper finds an indexing whose process died.
//   - A purge (knowledge.Purge): PK KBPURGE#<kbId>, SK DOC#<docId> for
//     a deleted document or KB for a deleted knowledge base, in GSI1
//     under KBPURGES by the time it is due (sparse), written in the
//     delete's transaction, removed by its last pass.
//     A knowledge base's purge whose first pass found documents
//     indexing keeps their ids (pending, with listed) and outlives the
//     collection, deleted at that pass (ListPurge).
type Knowledge struct {
	db    *dynamo.DB
	table dynamo.Table
}

// NewKnowledge returns the Knowledge store over the named Data table.
func NewKnowledge(db *dynamo.DB, dataTable string) *Knowledge {
	return &Knowledge{db: db, table: db.Table(dataTable)}
}

var _ knowledge.Store = (*Knowledge)(nil)

const (
	knowledgeJobKind = knowledge.JobKind
	kbPrefix         = "KB#"
	docPrefix        = "DOC#"
	kbCounterSK      = "COUNTER#KNOWLEDGE_BASES"
)

func kbPK(id string) string { return kbPrefix + id }

type kbItem struct {
	PK, SK        string
	Type          string    `dynamo:"type"`
	ID            string    `dynamo:"id"`
	UserID        string    `dynamo:"userId"`
	Name          string    `dynamo:"name"`
	Description   string    `dynamo:"description"`
	DocumentCount int       `dynamo:"documentCount"`
	ChunkCount    int       `dynamo:"chunkCount"`
	Version       int       `dynamo:"version"`
	CreatedAt     time.Time `dynamo:"createdAt"`
	UpdatedAt     time.Time `dynamo:"updatedAt"`
}

func (it kbItem) kb() knowledge.KnowledgeBase {
	return knowledge.KnowledgeBase{ID: it.ID, UserID: it.UserID, Name: it.Name, Description: it.Description, DocumentCount: it.DocumentCount,
		ChunkCount: it.ChunkCount, Version: it.Version, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
}

type docItem struct {
	PK, SK       string
	Type         string    `dynamo:"type"`
	ID           string    `dynamo:"id"`
	KBID         string    `dynamo:"kbId"`
	UserID       string    `dynamo:"userId"`
	AttachmentID string    `dynamo:"attachmentId"`
	Name         string    `dynamo:"name"`
	ContentType  string    `dynamo:"contentType"`
	Size         int64     `dynamo:"size"`
	Status       string    `dynamo:"status"`
	ChunkCount   *int      `dynamo:"chunkCount,omitempty"`
	Error        string    `dynamo:"error,omitempty"`
	Attempt      int       `dynamo:"attempt"`
	CreatedAt    time.Time `dynamo:"createdAt"`
	UpdatedAt    time.Time `dynamo:"updatedAt"`
}

func newDocItem(d knowledge.Document) docItem {
	return docItem{PK: kbPK(d.KnowledgeBaseID), SK: docPrefix + d.ID, Type: "kbdoc", ID: d.ID, KBID: d.KnowledgeBaseID, UserID: d.UserID,
		AttachmentID: d.AttachmentID, Name: d.Name, ContentType: d.ContentType, Size: d.Size, Status: string(d.Status),
		ChunkCount: d.ChunkCount, Error: d.Error, Attempt: d.Attempt, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
}

func (it docItem) doc() knowledge.Document {
	return knowledge.Document{ID: it.ID, KnowledgeBaseID: it.KBID, UserID: it.UserID, AttachmentID: it.AttachmentID, Name: it.Name,
		ContentType: it.ContentType, Size: it.Size, Status: knowledge.Status(it.Status), ChunkCount: it.ChunkCount, Error: it.Error,
		Attempt: it.Attempt, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
}

var (
	errKBNotFound  = errs.E("store.Knowledge", errs.NotFound, knowledge.CodeKnowledgeBaseNotFound, "no such knowledge base")
	errDocNotFound = errs.E("store.Knowledge", errs.NotFound, knowledge.CodeDocumentNotFound, "no such document")
)

// CreateKnowledgeBase puts kb and raises the user's counter in one
// transaction conditioned on the counter being under limit.
func (s *Knowledge) CreateKnowledgeBase(ctx context.Context, kb knowledge.KnowledgeBase, limit int) error {
	const op = "store.CreateKnowledgeBase"
	it := kbItem{PK: kbUserPK(kb.UserID), SK: kbPrefix + kb.ID, Type: "kb", ID: kb.ID, UserID: kb.UserID, Name: kb.Name,
		Description: kb.Description, Version: kb.Version, CreatedAt: kb.CreatedAt, UpdatedAt: kb.UpdatedAt}
	tx := s.db.WriteTx()
	tx.Put(s.table.Put(it).If("attribute_not_exists(PK)"))
	tx.Update(s.table.Update("PK", kbUserPK(kb.UserID)).Range("SK", kbCounterSK).Add("n", 1).If("attribute_not_exists(n) OR n < ?", limit))
	err := tx.Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, knowledge.CodeKnowledgeBaseLimit, fmt.Sprintf("you have %d knowledge bases, the most allowed; delete one first", limit))
	}
	return storeError(op, err)
}

// KnowledgeBase reads userID's knowledge base id (strongly consistent).
func (s *Knowledge) KnowledgeBase(ctx context.Context, userID, id string) (knowledge.KnowledgeBase, error) {
	const op = "store.KnowledgeBase"
	var it kbItem
	err := s.table.Get("PK", kbUserPK(userID)).Range("SK", dynamo.Equal, kbPrefix+id).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return knowledge.KnowledgeBase{}, errs.Wrap(op, errKBNotFound)
	}
	if err != nil {
		return knowledge.KnowledgeBase{}, storeError(op, err)
	}
	return it.kb(), nil
}

// ListKnowledgeBases queries the user's KB# items after the cursor (the
// last id of the page before).
func (s *Knowledge) ListKnowledgeBases(ctx context.Context, userID string, page paging.Cursor) ([]knowledge.KnowledgeBase, string, error) {
	items, more, err := kbPage[kbItem](ctx, s.table, kbUserPK(userID), kbPrefix, page)
	if err != nil {
		return nil, "", storeError("store.ListKnowledgeBases", err)
	}
	out := make([]knowledge.KnowledgeBase, len(items))
	for i, it := range items {
		out[i] = it.kb()
	}
	next := ""
	if more {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// kbPage reads up to page.Limit items of pk whose SK begins with
// prefix, after prefix+page.After, and whether another page follows.
func kbPage[T any](ctx context.Context, table dynamo.Table, pk, prefix string, page paging.Cursor) ([]T, bool, error) {
	limit := min(max(page.Limit, 1), paging.MaxLimit)
	q := table.Get("PK", pk).Consistent(true)
	if page.After != "" {
		q = q.Range("SK", dynamo.Between, prefix+page.After+"\x00", prefix+"\uffff")
	} else {
		q = q.Range("SK", dynamo.BeginsWith, prefix)
	}
	var all []T
	if err := q.Limit(limit+1).All(ctx, &all); err != nil {
		return nil, false, err
	}
	if len(all) > limit {
		return all[:limit], true, nil
	}
	return all, false, nil
}

// UpdateKnowledgeBase writes name and description conditioned on the
// version.
func (s *Knowledge) UpdateKnowledgeBase(ctx context.Context, kb knowledge.KnowledgeBase) error {
	const op = "store.UpdateKnowledgeBase"
	err := s.table.Update("PK", kbUserPK(kb.UserID)).Range("SK", kbPrefix+kb.ID).Set("name", kb.Name).Set("description", kb.Description).
		Set("updatedAt", kb.UpdatedAt).Add("version", 1).If("version = ?", kb.Version).Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, "", "the knowledge base changed meanwhile; retry")
	}
	return storeError(op, err)
}

// DeleteKnowledgeBase deletes the knowledge base's item, lowers the
// user's counter and puts the purge in one transaction. Its collection
// (documents, job heads) stays until FinishPurge: once the transaction
// is done nothing reaches it (every route reads the knowledge base
// first), and it lists the documents whose vectors the purge deletes.
func (s *Knowledge) DeleteKnowledgeBase(ctx context.Context, kb knowledge.KnowledgeBase, p knowledge.Purge) error {
	const op = "store.DeleteKnowledgeBase"
	tx := s.db.WriteTx()
	tx.Delete(s.table.Delete("PK", kbUserPK(kb.UserID)).Range("SK", kbPrefix+kb.ID).If("attribute_exists(PK)"))
	tx.Update(s.table.Update("PK", kbUserPK(kb.UserID)).Range("SK", kbCounterSK).Add("n", -1).If("n > ?", 0))
	tx.Put(s.table.Put(newPurgeItem(p)))
	err := tx.Run(ctx)
	if isConditionFailure(err) {
		return errs.Wrap(op, errKBNotFound)
	}
	return storeError(op, err)
}

const (
	purgePrefix = "KBPURGE#"
	purgesGSI   = "KBPURGES"
	purgeWhole  = "KB"
	// purgeTime is the due time in GSI1SK: fixed width, so that the
	// keys sort by time.
	purgeTime = "2006-01-02T15:04:05.000000000Z"
)

type purgeItem struct {
	PK, SK         string
	GSI1PK, GSI1SK string
	KBID           string    `dynamo:"kbId"`
	DocID          string    `dynamo:"docId"`
	Chunks         int       `dynamo:"chunks"`
	Listed         bool      `dynamo:"listed,omitempty"`
	Pending        []string  `dynamo:"pending,omitempty"`
	DueAt          time.Time `dynamo:"dueAt"`
	FinalAt        time.Time `dynamo:"finalAt"`
}

func purgeKey(p knowledge.Purge) (string, string) {
	if p.DocumentID == "" {
		return purgePrefix + p.KnowledgeBaseID, purgeWhole
	}
	return purgePrefix + p.KnowledgeBaseID, docPrefix + p.DocumentID
}

func purgeGSISK(p knowledge.Purge, due time.Time) string {
	return due.UTC().Format(purgeTime) + "#" + p.KnowledgeBaseID + "#" + p.DocumentID
}

func newPurgeItem(p knowledge.Purge) purgeItem {
	pk, sk := purgeKey(p)
	return purgeItem{PK: pk, SK: sk, GSI1PK: purgesGSI, GSI1SK: purgeGSISK(p, p.DueAt), KBID: p.KnowledgeBaseID, DocID: p.DocumentID,
		Chunks: p.Chunks, Listed: p.Listed, Pending: p.Pending, DueAt: p.DueAt.UTC(), FinalAt: p.FinalAt.UTC()}
}

// Purges queries GSI1's KBPURGES entries due at now.
func (s *Knowledge) Purges(ctx context.Context, now time.Time, limit int) ([]knowledge.Purge, error) {
	var items []purgeItem
	err := s.table.Get("GSI1PK", purgesGSI).Index("GSI1").Range("GSI1SK", dynamo.Less, now.UTC().Format(purgeTime)+"#\uffff").
		SearchLimit(limit).Limit(limit).All(ctx, &items)
	if err != nil {
		return nil, storeError("store.Purges", err)
	}
	out := make([]knowledge.Purge, len(items))
	for i, it := range items {
		out[i] = knowledge.Purge{KnowledgeBaseID: it.KBID, DocumentID: it.DocID, Chunks: it.Chunks, Listed: it.Listed, Pending: it.Pending,
			DueAt: it.DueAt, FinalAt: it.FinalAt}
	}
	return out, nil
}

// DeferPurge moves the purge's due time, conditioned on it existing.
func (s *Knowledge) DeferPurge(ctx context.Context, p knowledge.Purge, at time.Time) error {
	pk, sk := purgeKey(p)
	err := s.table.Update("PK", pk).Range("SK", sk).Set("GSI1SK", purgeGSISK(p, at)).Set("dueAt", at.UTC()).If("attribute_exists(PK)").Run(ctx)
	if isConditionFailure(err) {
		return nil
	}
	return storeError("store.DeferPurge", err)
}

// ListPurge records, on a knowledge base's purge, that its collection
// was read (listed) with p.Pending, the documents that were indexing,
// and makes it due at at: one write conditioned on the purge existing
// (finished meanwhile: nothing more is done). It then deletes the
// collection (documents, job heads) in batches: an indexing attempt
// still running loses its lease at its next renewal, and the purge's
// later passes read the list instead. A failure after the write leaves
// the rest of the collection to FinishPurge.
func (s *Knowledge) ListPurge(ctx context.Context, p knowledge.Purge, at time.Time) error {
	const op = "store.ListPurge"
	if p.DocumentID != "" {
		return errs.E(op, errs.Internal, "", "a document's purge has no list")
	}
	pk, sk := purgeKey(p)
	u := s.table.Update("PK", pk).Range("SK", sk).Set("listed", true).Set("GSI1SK", purgeGSISK(p, at)).Set("dueAt", at.UTC())
	if len(p.Pending) > 0 {
		u.Set("pending", p.Pending)
	} else {
		u.Remove("pending")
	}
	err := u.If("attribute_exists(PK)").Run(ctx)
	if isConditionFailure(err) {
		return nil
	}
	if err != nil {
		return storeError(op, err)
	}
	return errs.Wrap(op, deleteCollection(ctx, s.table, kbPK(p.KnowledgeBaseID), ""))
}

// FinishPurge deletes, for a knowledge base's purge, every item left of
// its collection (documents, job heads) in batches, then the purge.
func (s *Knowledge) FinishPurge(ctx context.Context, p knowledge.Purge) error {
	const op = "store.FinishPurge"
	if p.DocumentID == "" {
		if err := deleteCollection(ctx, s.table, kbPK(p.KnowledgeBaseID), ""); err != nil {
			return errs.Wrap(op, err)
		}
	}
	pk, sk := purgeKey(p)
	return storeError(op, s.table.Delete("PK", pk).Range("SK", sk).Run(ctx))
}

// CreateDocument puts d, raises the knowledge base's documentCount
// (conditioned on it being under knowledge.MaxDocuments) and starts the
// job's log head, in one transaction.
func (s *Knowledge) CreateDocument(ctx context.Context, d knowledge.Document, lease time.Time) error {
	const op = "store.CreateDocument"
	tx := s.db.WriteTx()
	tx.Put(s.table.Put(newDocItem(d)).If("attribute_not_exists(PK)"))
	tx.Update(s.table.Update("PK", kbUserPK(d.UserID)).Range("SK", kbPrefix+d.KnowledgeBaseID).Add("documentCount", 1).
		If("attribute_exists(PK) AND documentCount < ?", knowledge.MaxDocuments))
	if err := s.logs().start(tx, logStart{PK: kbPK(d.KnowledgeBaseID), Kind: knowledgeJobKind, ID: d.ID, Status: string(knowledge.StatusIndexing),
		Target: docPrefix + d.ID, Lease: job.Lease{Until: lease}}); err != nil {
		return errs.Wrap(op, err)
	}
	err := tx.Run(ctx)
	if failedCondition(err, 1) {
		if _, gerr := s.KnowledgeBase(ctx, d.UserID, d.KnowledgeBaseID); errs.Is(gerr, errs.NotFound) {
			return gerr
		}
		return errs.E(op, errs.Conflict, knowledge.CodeDocumentLimit, fmt.Sprintf("the knowledge base holds %d documents, the most allowed", knowledge.MaxDocuments))
	}
	return storeError(op, err)
}

func (s *Knowledge) logs() eventLogs { return eventLogs{db: s.db, table: s.table} }

// Document reads a document (strongly consistent).
func (s *Knowledge) Document(ctx context.Context, kbID, id string) (knowledge.Document, error) {
	const op = "store.Document"
	var it docItem
	err := s.table.Get("PK", kbPK(kbID)).Range("SK", dynamo.Equal, docPrefix+id).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return knowledge.Document{}, errs.Wrap(op, errDocNotFound)
	}
	if err != nil {
		return knowledge.Document{}, storeError(op, err)
	}
	return it.doc(), nil
}

// ListDocuments queries kbID's DOC# items after the cursor.
func (s *Knowledge) ListDocuments(ctx context.Context, kbID string, page paging.Cursor) ([]knowledge.Document, string, error) {
	items, more, err := kbPage[docItem](ctx, s.table, kbPK(kbID), docPrefix, page)
	if err != nil {
		return nil, "", storeError("store.ListDocuments", err)
	}
	out := make([]knowledge.Document, len(items))
	for i, it := range items {
		out[i] = it.doc()
	}
	next := ""
	if more {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// Documents queries all of kbID's DOC# items.
func (s *Knowledge) Documents(ctx context.Context, kbID string) ([]knowledge.Document, error) {
	var items []docItem
	if err := s.table.Get("PK", kbPK(kbID)).Range("SK", dynamo.BeginsWith, docPrefix).Consistent(true).All(ctx, &items); err != nil {
		return nil, storeError("store.Documents", err)
	}
	out := make([]knowledge.Document, len(items))
	for i, it := range items {
		out[i] = it.doc()
	}
	return out, nil
}

// RenewIndexing renews the head's lease in one transaction with a check
// that the document is indexing at ref.Attempt.
func (s *Knowledge) RenewIndexing(ctx context.Context, ref knowledge.Ref, until time.Time) error {
	const op = "store.RenewIndexing"
	tx := s.db.WriteTx()
	tx.Check(s.table.Check("PK", kbPK(ref.KnowledgeBaseID)).Range("SK", docPrefix+ref.DocumentID).
		If("$ = ? AND attempt = ?", "status", string(knowledge.StatusIndexing), ref.Attempt))
	tx.Update(s.logs().renew(kbPK(ref.KnowledgeBaseID), ref.DocumentID, nil, job.Lease{Until: until}, time.Now()).If(activeCond, true))
	err := tx.Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, job.CodeNotActive, "the indexing is no longer this attempt's")
	}
	return storeError(op, err)
}

// ClaimIndexing raises the document's attempt and renews the head's
// lease, conditioned on the lease having ended before expiredBefore.
func (s *Knowledge) ClaimIndexing(ctx context.Context, kbID, docID string, expiredBefore, until time.Time) (knowledge.Document, error) {
	const op = "store.ClaimIndexing"
	d, err := s.Document(ctx, kbID, docID)
	if errs.Is(err, errs.NotFound) {
		// A document deleted while its job's end was lost: end the job.
		tx := s.db.WriteTx()
		if eerr := s.logs().end(tx, kbPK(kbID), docID, string(knowledge.StatusFailed), nil, expiredBefore, time.Now()); eerr != nil {
			return knowledge.Document{}, errs.Wrap(op, eerr)
		}
		if terr := tx.Run(ctx); terr != nil && !isConditionFailure(terr) {
			return knowledge.Document{}, storeError(op, terr)
		}
		return knowledge.Document{}, err
	}
	if err != nil {
		return knowledge.Document{}, err
	}
	tx := s.db.WriteTx()
	tx.Update(s.table.Update("PK", kbPK(kbID)).Range("SK", docPrefix+docID).Add("attempt", 1).
		If("$ = ? AND attempt = ?", "status", string(knowledge.StatusIndexing), d.Attempt))
	tx.Update(s.logs().renew(kbPK(kbID), docID, nil, job.Lease{Until: until}, time.Now()).If(activeCond+" AND leaseUntil < ?", true, expiredBefore.UnixMilli()))
	err = tx.Run(ctx)
	if isConditionFailure(err) {
		return knowledge.Document{}, errs.E(op, errs.Conflict, "", "the indexing was renewed or claimed meanwhile")
	}
	if err != nil {
		return knowledge.Document{}, storeError(op, err)
	}
	d.Attempt++
	return d, nil
}

// FinishDocument writes d's outcome, the knowledge base's chunk count
// (ready) and the job's end in one transaction, conditioned on the
// document indexing at ref.Attempt and, when ready, on the chunk count
// staying within knowledge.MaxChunks.
func (s *Knowledge) FinishDocument(ctx context.Context, ref knowledge.Ref, d knowledge.Document) error {
	const op = "store.FinishDocument"
	tx := s.db.WriteTx()
	u := s.table.Update("PK", kbPK(d.KnowledgeBaseID)).Range("SK", docPrefix+d.ID).Set("status", string(d.Status)).Set("updatedAt", d.UpdatedAt).
		If("$ = ? AND attempt = ?", "status", string(knowledge.StatusIndexing), ref.Attempt)
	n := 0
	if d.ChunkCount != nil {
		n = *d.ChunkCount
		u.Set("chunkCount", n)
	}
	if d.Error != "" {
		u.Set("error", d.Error)
	}
	tx.Update(u)
	if d.Status == knowledge.StatusReady {
		tx.Update(s.table.Update("PK", kbUserPK(d.UserID)).Range("SK", kbPrefix+d.KnowledgeBaseID).Add("chunkCount", n).
			If("attribute_exists(PK) AND chunkCount <= ?", knowledge.MaxChunks-n))
	}
	if err := s.logs().end(tx, kbPK(d.KnowledgeBaseID), d.ID, string(d.Status), nil, time.Time{}, time.Now()); err != nil {
		return errs.Wrap(op, err)
	}
	err := tx.Run(ctx)
	switch {
	case failedCondition(err, 0):
		if _, gerr := s.Document(ctx, d.KnowledgeBaseID, d.ID); errs.Is(gerr, errs.NotFound) {
			return gerr
		}
		return errs.E(op, errs.Conflict, job.CodeNotActive, "the indexing is no longer this attempt's")
	case d.Status == knowledge.StatusReady && failedCondition(err, 1):
		if _, gerr := s.KnowledgeBase(ctx, d.UserID, d.KnowledgeBaseID); errs.Is(gerr, errs.NotFound) {
			return errs.Wrap(op, errDocNotFound)
		}
		return errs.E(op, errs.Conflict, knowledge.CodeChunkLimit, "the knowledge base would hold too many chunks")
	case isConditionFailure(err):
		return errs.E(op, errs.Conflict, job.CodeNotActive, "the indexing job has ended")
	}
	return storeError(op, err)
}

// DeleteDocument deletes d (conditioned on its status being the one
// read), takes its counts off its knowledge base and puts the purge of
// its vectors in one transaction,
// then ends its job if it is still active.
func (s *Knowledge) DeleteDocument(ctx context.Context, d knowledge.Document, p knowledge.Purge) error {
	const op = "store.DeleteDocument"
	tx := s.db.WriteTx()
	tx.Delete(s.table.Delete("PK", kbPK(d.KnowledgeBaseID)).Range("SK", docPrefix+d.ID).If("$ = ?", "status", string(d.Status)))
	u := s.table.Update("PK", kbUserPK(d.UserID)).Range("SK", kbPrefix+d.KnowledgeBaseID).Add("documentCount", -1).If("attribute_exists(PK)")
	if d.Status == knowledge.StatusReady && d.ChunkCount != nil {
		u.Add("chunkCount", -*d.ChunkCount)
	}
	tx.Update(u)
	tx.Put(s.table.Put(newPurgeItem(p)))
	err := tx.Run(ctx)
	if isConditionFailure(err) {
		return errs.E(op, errs.Conflict, "", "the document changed meanwhile; retry")
	}
	if err != nil {
		return storeError(op, err)
	}
	if d.Status == knowledge.StatusIndexing {
		end := s.db.WriteTx()
		if err := s.logs().end(end, kbPK(d.KnowledgeBaseID), d.ID, string(knowledge.StatusFailed), nil, time.Time{}, time.Now()); err == nil {
			// Best effort: a job left active is ended by the sweeper,
			// whose claim finds the document gone.
			_ = end.Run(ctx)
		}
	}
	return nil
}

func kbUserPK(id string) string { return "USER#" + id }
