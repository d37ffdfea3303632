package attachment

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/logging"
	"github.com/workflowchat/service/shared/model"
)

// Store keeps attachments in their chat's item collection and each user's
// storage counter (store.Attachments implements it). Errors are
// errs.Errors: NotFound CHAT_NOT_FOUND or ATTACHMENT_NOT_FOUND, Forbidden
// for another user's chat, and Unavailable or Internal for storage
// failures.
type Store interface {
	// CreateAttachment stores a (pending, Charged = Size) and adds its
	// size to its owner's storage counter, in one transaction conditioned
	// on the chat being the owner's and not being deleted, and on the
	// counter staying within quota bytes: TooLarge QUOTA_EXCEEDED
	// otherwise, nothing written.
	CreateAttachment(ctx context.Context, a Attachment, quota int64) error
	// Attachment returns attachment id of chat chatID for userID, from one
	// consistent read of the chat and the attachment: NotFound
	// CHAT_NOT_FOUND, Forbidden (another user's chat), NotFound
	// ATTACHMENT_NOT_FOUND (also while it is being deleted).
	Attachment(ctx context.Context, userID, chatID, id string) (Attachment, error)
	// AttachmentChat returns the chat of attachment id (any user's).
	// NotFound ATTACHMENT_NOT_FOUND.
	AttachmentChat(ctx context.Context, id string) (string, error)
	// MarkReady records that a's upload was checked and copied (etag),
	// conditioned on a being pending and not deleted and its chat
	// writable: Conflict ATTACHMENT_CHANGED otherwise.
	MarkReady(ctx context.Context, a Attachment, etag string, now time.Time) error
	// MarkFailed records that a failed (reason) and gives its Charged
	// bytes back to the owner's counter, in one transaction conditioned
	// like MarkReady: Conflict ATTACHMENT_CHANGED otherwise.
	MarkFailed(ctx context.Context, a Attachment, reason string, now time.Time) error
	// BeginDelete marks a deleted (from then on it cannot become ready or
	// failed, and reads no longer find it) and returns it as marked.
	// NotFound ATTACHMENT_NOT_FOUND.
	BeginDelete(ctx context.Context, a Attachment) (Attachment, error)
	// DeleteAttachments deletes atts (of one chat) and gives their
	// Charged bytes back to their owners' counters, in transactions of at
	// most 99 attachments each conditioned on each one existing with its
	// Charged as given: Conflict ATTACHMENT_CHANGED when one is gone or
	// changed since it was read (read them again and retry), and that
	// transaction writes nothing.
	DeleteAttachments(ctx context.Context, atts []Attachment) error
	// ChatAttachments returns every attachment of chat chatID, deleted or
	// not, from a consistent Query.
	ChatAttachments(ctx context.Context, chatID string) ([]Attachment, error)
	// StorageUsed returns the bytes charged to userID's quota.
	StorageUsed(ctx context.Context, userID string) (int64, error)
}

// Service implements the attachment operations.
type Service struct {
	store Store
	blobs blob.Store
	quota int64
	now   func() time.Time
}

// Options are NewService's dependencies.
type Options struct {
	Store Store
	Blobs blob.Store
	// Quota is each user's storage quota in bytes (USER_STORAGE_QUOTA);
	// zero means DefaultQuota.
	Quota int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultQuota is the storage quota of a Service given none: 1 GiB.
const DefaultQuota = 1 << 30

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Quota <= 0 {
		o.Quota = DefaultQuota
	}
	return &Service{store: o.Store, blobs: o.Blobs, quota: o.Quota, now: o.Now}
}

func (s *Service) clock() time.Time { return s.now().UTC() }

// Create creates a pending attachment in chat chatID of the signed-in user
// and returns it with its upload URL. Errors in this order: Invalid
// (fields), UnsupportedMediaType, TooLarge ATTACHMENT_TOO_LARGE, NotFound
// CHAT_NOT_FOUND, Forbidden, TooLarge QUOTA_EXCEEDED.
func (s *Service) Create(ctx context.Context, chatID string, in CreateRequest) (Attachment, error) {
	const op = "attachment.Create"
	v, err := in.validate()
	if err != nil {
		return Attachment{}, err
	}
	now := s.clock()
	a := Attachment{ID: uuid.NewString(), ChatID: chatID, UserID: auth.UserID(ctx), Name: v.name, ContentType: v.contentType,
		Size: v.size, Status: StatusPending, CreatedAt: now, Charged: v.size}
	up, err := s.blobs.PresignPut(ctx, UploadKey(a.UserID, a.ID), blob.PutOptions{ContentType: a.ContentType, Size: a.Size, CreateOnly: true}, UploadTTL)
	if err != nil {
		return Attachment{}, errs.Wrap(op, err)
	}
	a.UploadExpires = up.ExpiresAt
	if err := s.store.CreateAttachment(ctx, a, s.quota); err != nil {
		return Attachment{}, errs.Wrap(op, err)
	}
	a.UploadURL, a.UploadHeaders = up.URL, up.Headers
	return a.view(), nil
}

// Get returns attachment id of chat chatID, checking a pending one's
// upload first (see the package comment), with a download URL when it is
// ready, and when it is still pending with an upload URL signed afresh
// that expires when the first one does (a client that lost the create's
// answer, or whose URL a restarted dev server no longer honours, can
// still upload; the deadline does not move). NotFound CHAT_NOT_FOUND,
// Forbidden, NotFound ATTACHMENT_NOT_FOUND; the blob store's errors.
func (s *Service) Get(ctx context.Context, chatID, id string) (Attachment, error) {
	const op = "attachment.Get"
	a, err := s.store.Attachment(ctx, auth.UserID(ctx), chatID, id)
	if err != nil {
		return Attachment{}, errs.Wrap(op, err)
	}
	if a, err = s.settle(ctx, a); err != nil {
		return Attachment{}, errs.Wrap(op, err)
	}
	if left := a.UploadExpires.Sub(s.clock()); a.Status == StatusPending && left >= blob.MinTTL {
		up, err := s.blobs.PresignPut(ctx, UploadKey(a.UserID, a.ID), blob.PutOptions{ContentType: a.ContentType, Size: a.Size, CreateOnly: true}, left)
		if err != nil {
			return Attachment{}, errs.Wrap(op, err)
		}
		a.UploadURL, a.UploadHeaders = up.URL, up.Headers
	}
	if a.Status == StatusReady {
		down, err := s.blobs.PresignGet(ctx, Key(a.UserID, a.ID), DownloadTTL)
		if err != nil {
			return Attachment{}, errs.Wrap(op, err)
		}
		a.DownloadURL, a.DownloadExpiresAt = down.URL, &down.ExpiresAt
	}
	return a.view(), nil
}

// view is a as the API shows it: the upload deadline while pending.
func (a Attachment) view() Attachment {
	a.ExpiresAt = nil
	if a.Status == StatusPending && !a.UploadExpires.IsZero() {
		t := a.UploadExpires
		a.ExpiresAt = &t
	}
	return a
}

// Delete deletes attachment id of chat chatID: its bytes are retired
// before its item goes (see retire), so its URLs stop working before the
// answer, and its size goes back to the quota with the item. A delete
// that failed after marking the attachment deleted (reads no longer find
// it) is finished by the next one. NotFound CHAT_NOT_FOUND, Forbidden,
// NotFound ATTACHMENT_NOT_FOUND.
func (s *Service) Delete(ctx context.Context, chatID, id string) error {
	const op = "attachment.Delete"
	userID := auth.UserID(ctx)
	a, err := s.store.Attachment(ctx, userID, chatID, id)
	if errs.CodeOf(err) == CodeNotFound {
		// The chat is the caller's; the attachment may be one whose delete
		// stopped half-way, still holding its bytes and its quota:
		// BeginDelete finds it (the caller's, marked or not) or answers
		// NotFound.
		a, err = Attachment{ID: id, ChatID: chatID, UserID: userID}, nil
	}
	if err != nil {
		return errs.Wrap(op, err)
	}
	if a, err = s.store.BeginDelete(ctx, a); err != nil {
		return errs.Wrap(op, err)
	}
	if err := s.retire(ctx, []Attachment{a}); err != nil {
		return errs.Wrap(op, err)
	}
	err = s.store.DeleteAttachments(ctx, []Attachment{a})
	if errs.CodeOf(err) == CodeChanged {
		// Only a concurrent delete (of the attachment or its chat) changes
		// an attachment marked deleted: it is gone, as asked.
		return nil
	}
	return errs.Wrap(op, err)
}

// DeleteChat deletes every attachment of chat chatID, retiring their bytes
// first (see retire), then the items with the quota they hold. It is part
// of the chat's delete (chat.Service.Delete): it runs once the chat is marked deleted, so
// no attachment can be added meanwhile, and before the chat's items go,
// so a failure leaves the chat in place and a retried delete finishes
// the job. userID is the chat's owner.
func (s *Service) DeleteChat(ctx context.Context, chatID, userID string) error {
	const op = "attachment.DeleteChat"
	for attempt := 0; ; attempt++ {
		atts, err := s.store.ChatAttachments(ctx, chatID)
		if err != nil || len(atts) == 0 {
			return errs.Wrap(op, err)
		}
		if err := s.retire(ctx, atts); err != nil {
			return errs.Wrap(op, err)
		}
		err = s.store.DeleteAttachments(ctx, atts)
		if errs.CodeOf(err) != CodeChanged || attempt == 2 {
			return errs.Wrap(op, err)
		}
		// An attachment changed (settled or deleted alone) since it was
		// read: read them again.
	}
}

// Settle returns a as it is now: a pending attachment's upload checked as
// a read of it checks it (see the package comment), made ready or failed,
// or left pending while no upload arrived. It fails only when storage
// does.
func (s *Service) Settle(ctx context.Context, a Attachment) (Attachment, error) {
	return s.settle(ctx, a)
}

// settle checks a pending attachment's upload (see the package comment)
// and returns the attachment as it is now. It fails only when storage
// does; a mismatched upload is a failed attachment, not an error.
func (s *Service) settle(ctx context.Context, a Attachment) (Attachment, error) {
	const op = "attachment.settle"
	if a.Status != StatusPending {
		return a, nil
	}
	upload := UploadKey(a.UserID, a.ID)
	obj, err := s.blobs.Get(ctx, upload)
	if errs.Is(err, errs.NotFound) {
		if s.clock().After(a.UploadExpires.Add(UploadGrace)) {
			return s.fail(ctx, a, "no upload arrived before the upload URL expired")
		}
		return a, nil
	}
	if err != nil {
		return a, errs.Wrap(op, err)
	}
	reason := ""
	if obj.Size != a.Size {
		reason = fmt.Sprintf("the upload holds %d bytes, not the declared %d", obj.Size, a.Size)
	} else if obj.ContentType != a.ContentType {
		reason = fmt.Sprintf("the upload is of type %q, not the declared %q", obj.ContentType, a.ContentType)
	} else {
		reason, err = Check(a.ContentType, a.Size, obj.Body)
	}
	obj.Body.Close()
	if err != nil {
		return a, errs.E(op, errs.Unavailable, blob.CodeUnavailable, "the upload could not be read; retry shortly").WithCause(err)
	}
	if reason != "" {
		return s.fail(ctx, a, reason)
	}
	// The checked bytes go where no upload URL reaches, on condition that
	// they are still the bytes checked.
	if _, err := s.blobs.Copy(ctx, upload, Key(a.UserID, a.ID), blob.CopyOptions{IfMatch: obj.ETag}); err != nil {
		if errs.Is(err, errs.Conflict) || errs.Is(err, errs.NotFound) {
			return a, nil // uploaded again (or deleted) meanwhile: checked at the next read
		}
		return a, errs.Wrap(op, err)
	}
	if err := s.store.MarkReady(ctx, a, obj.ETag, s.clock()); err != nil {
		if errs.CodeOf(err) != CodeChanged {
			return a, errs.Wrap(op, err)
		}
		return s.afterRace(ctx, a)
	}
	s.closeQuietly(ctx, a)
	a.Status, a.ETag = StatusReady, obj.ETag
	return a, nil
}

// fail marks a failed with reason and deletes its upload.
func (s *Service) fail(ctx context.Context, a Attachment, reason string) (Attachment, error) {
	if err := s.store.MarkFailed(ctx, a, reason, s.clock()); err != nil {
		if errs.CodeOf(err) != CodeChanged {
			return a, errs.Wrap("attachment.fail", err)
		}
		return s.afterRace(ctx, a)
	}
	s.closeQuietly(ctx, a)
	a.Status, a.Reason, a.Charged = StatusFailed, reason, 0
	return a, nil
}

// afterRace reads a again after another request settled or deleted it
// first. When it is no longer there to be ready, the copy this request
// may have made is deleted.
func (s *Service) afterRace(ctx context.Context, a Attachment) (Attachment, error) {
	cur, err := s.store.Attachment(ctx, a.UserID, a.ChatID, a.ID)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			s.deleteQuietly(ctx, Key(a.UserID, a.ID))
		}
		return a, errs.Wrap("attachment.afterRace", err)
	}
	return cur, nil
}

// deleteQuietly deletes blobs whose deletion is housekeeping: a failure
// is logged, not returned.
func (s *Service) deleteQuietly(ctx context.Context, keys ...string) {
	if err := s.blobs.Delete(ctx, keys...); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "could not delete blobs", "keys", keys, "err", err.Error())
	}
}

// closeUpload puts a tombstone (an empty blob) at a's upload key: the
// upload URL, create-only, then answers 412 for the rest of its life, so
// no upload lands after the attachment was settled or deleted. The
// tombstone goes with the uploads/ prefix's lifecycle (a day).
func (s *Service) closeUpload(ctx context.Context, a Attachment) error {
	_, err := blob.PutBytes(ctx, s.blobs, UploadKey(a.UserID, a.ID), nil, tombstoneType)
	return err
}

// tombstoneType is the content type of a closed upload's tombstone.
const tombstoneType = "application/x-closed-upload"

// closeQuietly is closeUpload after a settle: a failure is logged (the
// attachment is settled; a late upload would only sit in uploads/ until
// the lifecycle removes it).
func (s *Service) closeQuietly(ctx context.Context, a Attachment) {
	if err := s.closeUpload(ctx, a); err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "could not close an upload", "attachment", a.ID, "err", err.Error())
	}
}

// retireParallelism bounds the tombstone writes of one retire.
const retireParallelism = 8

// retire makes atts' bytes unreachable before their items go: their
// checked copies are deleted (download URLs answer 404) and their uploads
// closed (upload URLs answer 412).
func (s *Service) retire(ctx context.Context, atts []Attachment) error {
	keys := make([]string, 0, len(atts))
	for _, a := range atts {
		keys = append(keys, Key(a.UserID, a.ID))
	}
	if err := s.blobs.Delete(ctx, keys...); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(retireParallelism)
	for _, a := range atts {
		g.Go(func() error { return s.closeUpload(gctx, a) })
	}
	return g.Wait()
}

// Ready returns userID's attachment id of chat chatID once it is ready,
// checking a pending upload first: what a message's attachmentIds name.
// NotFound CHAT_NOT_FOUND, Forbidden, NotFound ATTACHMENT_NOT_FOUND,
// Conflict ATTACHMENT_NOT_READY (no upload yet) or ATTACHMENT_FAILED
// (with its reason).
func (s *Service) Ready(ctx context.Context, userID, chatID, id string) (Attachment, error) {
	const op = "attachment.Ready"
	a, err := s.store.Attachment(ctx, userID, chatID, id)
	if err != nil {
		return Attachment{}, errs.Wrap(op, err)
	}
	if a, err = s.settle(ctx, a); err != nil {
		return Attachment{}, errs.Wrap(op, err)
	}
	switch a.Status {
	case StatusPending:
		return Attachment{}, errs.E(op, errs.Conflict, CodeNotReady, fmt.Sprintf("attachment %s has not been uploaded yet", id))
	case StatusFailed:
		return Attachment{}, errs.E(op, errs.Conflict, CodeFailed, fmt.Sprintf("attachment %s failed: %s", id, a.Reason))
	}
	return a, nil
}

// ReadyByID is Ready for an attachment of any of userID's chats: what a
// workflow run input of format "attachment" names. NotFound
// ATTACHMENT_NOT_FOUND (also for a malformed id and for another user's
// attachment), and Ready's
// errors.
func (s *Service) ReadyByID(ctx context.Context, userID, id string) (Attachment, error) {
	const op = "attachment.ReadyByID"
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return Attachment{}, errs.E(op, errs.NotFound, CodeNotFound, "no attachment "+id)
	}
	chatID, err := s.store.AttachmentChat(ctx, id)
	if err != nil {
		return Attachment{}, errs.Wrap(op, err)
	}
	a, err := s.Ready(ctx, userID, chatID, id)
	if errs.Is(err, errs.Forbidden) {
		// Another user's attachment reads as no attachment: a caller
		// naming ids learns nothing of other users' files.
		return Attachment{}, errs.E(op, errs.NotFound, CodeNotFound, "no attachment "+id)
	}
	return a, errs.Wrap(op, err)
}

// Open opens a ready attachment's bytes (exactly a.Size of them). The
// caller closes the reader. NotFound when it was deleted meanwhile.
func (s *Service) Open(ctx context.Context, a Attachment) (io.ReadCloser, error) {
	const op = "attachment.Open"
	if a.Status != StatusReady {
		return nil, errs.E(op, errs.Conflict, CodeNotReady, "attachment "+a.ID+" is not ready")
	}
	obj, err := s.blobs.Get(ctx, Key(a.UserID, a.ID))
	if errs.Is(err, errs.NotFound) {
		return nil, errs.E(op, errs.NotFound, CodeNotFound, "attachment "+a.ID+" was deleted")
	}
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	return obj.Body, nil
}

// Read returns a ready attachment's bytes when it holds at most max:
// TooLarge ATTACHMENT_TOO_LARGE otherwise (nothing is read).
func (s *Service) Read(ctx context.Context, a Attachment, max int64) ([]byte, error) {
	const op = "attachment.Read"
	if a.Size > max {
		return nil, errs.E(op, errs.TooLarge, CodeTooLarge, fmt.Sprintf("attachment %s holds %d bytes, more than the %d allowed here", a.ID, a.Size, max))
	}
	body, err := s.Open(ctx, a)
	if err != nil {
		return nil, errs.Wrap(op, err)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, max))
	if err != nil {
		return nil, errs.E(op, errs.Unavailable, blob.CodeUnavailable, "the attachment could not be read; retry shortly").WithCause(err)
	}
	return b, nil
}

// Text returns a ready text-like attachment's text, cut to at most max
// bytes at a character boundary, and whether it was cut: what a model
// reads as context. Invalid ATTACHMENT_NOT_TEXT for other types.
func (s *Service) Text(ctx context.Context, a Attachment, max int) (string, bool, error) {
	const op = "attachment.Text"
	if !IsText(a.ContentType) {
		return "", false, errs.E(op, errs.Invalid, "ATTACHMENT_NOT_TEXT", fmt.Sprintf("attachment %s is %s, not text", a.ID, a.ContentType))
	}
	body, err := s.Open(ctx, a)
	if err != nil {
		return "", false, errs.Wrap(op, err)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, int64(max)))
	if err != nil {
		return "", false, errs.E(op, errs.Unavailable, blob.CodeUnavailable, "the attachment could not be read; retry shortly").WithCause(err)
	}
	cut := int64(len(b)) < a.Size
	// A cut inside the last character drops it.
	for k := 1; k <= utf8.UTFMax-1 && k <= len(b); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRune(b[len(b)-k:]) {
				b = b[:len(b)-k]
			}
			break
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), cut, nil
}

// Bounds of what a model reads of an attachment (ForModel's defaults).
const (
	// ModelTextBound is how much of a text file a model reads as context:
	// 64 KiB, about 16,000 tokens; the rest is cut, and the model is told.
	ModelTextBound = 64 << 10
	// ModelDataBound is the largest image or PDF sent to a model, 3.75 MB
	// (Bedrock's bound on an image; Anthropic takes 5 MB, OpenAI 20 MB):
	// a larger one reaches the model as a note.
	ModelDataBound = 3_750_000
)

// ForModel returns ready attachment a as a model taking in reads it
// (model.UserParts): a text file's text cut to maxText bytes; an image's
// or a PDF's bytes when in takes it and it holds at most maxData bytes
// (else no bytes: the model gets a note); zero bounds mean ModelTextBound
// and ModelDataBound. Fails as Open and Text do.
func (s *Service) ForModel(ctx context.Context, a Attachment, in model.Input, maxText int, maxData int64) (model.Attachment, error) {
	const op = "attachment.ForModel"
	if maxText <= 0 {
		maxText = ModelTextBound
	}
	if maxData <= 0 {
		maxData = ModelDataBound
	}
	m := model.Attachment{Name: a.Name, ContentType: a.ContentType, Size: a.Size}
	if IsText(a.ContentType) {
		text, cut, err := s.Text(ctx, a, maxText)
		if err != nil {
			return model.Attachment{}, errs.Wrap(op, err)
		}
		m.Text, m.Cut = text, cut
		return m, nil
	}
	if !in.Takes(m) || a.Size > maxData {
		return m, nil
	}
	data, err := s.Read(ctx, a, maxData)
	if err != nil {
		return model.Attachment{}, errs.Wrap(op, err)
	}
	m.Data = data
	return m, nil
}

// MaxFileText bounds the text a workflow run reads from an attachment
// its input names (an input property of format attachment): the 8 MiB a
// run's value may be.
const MaxFileText = 8 << 20

// CheckFile returns nil when id is one of userID's ready attachments
// whose text a workflow run can read: text-like and at most MaxFileText.
// Errors: ReadyByID's (NotFound ATTACHMENT_NOT_FOUND, Forbidden, Conflict
// ATTACHMENT_NOT_READY), Invalid ATTACHMENT_NOT_TEXT, Invalid
// ATTACHMENT_TOO_LARGE.
func (s *Service) CheckFile(ctx context.Context, userID, id string) error {
	_, err := s.file(ctx, userID, id)
	return err
}

// FileText returns the text of userID's attachment id (see CheckFile).
func (s *Service) FileText(ctx context.Context, userID, id string) (string, error) {
	const op = "attachment.FileText"
	a, err := s.file(ctx, userID, id)
	if err != nil {
		return "", err
	}
	text, _, err := s.Text(ctx, a, MaxFileText)
	return text, errs.Wrap(op, err)
}

func (s *Service) file(ctx context.Context, userID, id string) (Attachment, error) {
	const op = "attachment.CheckFile"
	a, err := s.ReadyByID(ctx, userID, id)
	if err != nil {
		return Attachment{}, errs.Wrap(op, err)
	}
	if !IsText(a.ContentType) {
		return Attachment{}, errs.E(op, errs.Invalid, "ATTACHMENT_NOT_TEXT", fmt.Sprintf("attachment %s is %s: a run reads the text of text, Markdown, CSV and JSON files", a.ID, a.ContentType))
	}
	if a.Size > MaxFileText {
		return Attachment{}, errs.E(op, errs.Invalid, "ATTACHMENT_TOO_LARGE", fmt.Sprintf("attachment %s is %d bytes; a run reads at most %d", a.ID, a.Size, MaxFileText))
	}
	return a, nil
}
