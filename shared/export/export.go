// Package export is a user's copy of their data: a zip of JSON files (the
// profile, chats with their messages, workflows, runs, triggers without
// their secrets, tool policies, usage, the audit log) and every
// attachment's bytes, written to the blob store by a queued job and
// downloaded through a presigned URL.
//
// Requesting an export (Service.Request) queues it, at most one pending or
// running per user (decided by the store's conditional write). A Runner,
// run by the sweeper every sweep, claims each queued export with a lease,
// writes the zip (Sections, in order) to a temporary file and from there
// to the blob store (a Put needs the exact size, and the file keeps the
// archive out of memory), then marks it completed. An export whose
// process died is claimed again once its lease ran out and written again
// from the start, over the same key; after MaxAttempts it is marked failed.
package export

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/audit"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
)

// Status is the state of an export.
type Status string

// The states: queued, being written, written (downloadable), given up.
const (
	Pending   Status = "pending"
	Running   Status = "running"
	Completed Status = "completed"
	Failed    Status = "failed"
)

// Bounds of an export.
const (
	// DownloadTTL is how long a downloadUrl works.
	DownloadTTL = 15 * time.Minute
	// MaxDuration bounds one attempt at writing an export; its lease
	// lasts a little longer, so a live attempt is never claimed twice.
	MaxDuration = 10 * time.Minute
	// MaxAttempts bounds the attempts at one export (each one after a
	// crash or a timeout); the last failure marks it failed.
	MaxAttempts = 3
	// MaxPerSweep bounds the exports one sweep writes.
	MaxPerSweep = 2
	// Retention is how long an export (its item and its zip) is kept
	// after its request.
	Retention = 7 * 24 * time.Hour
	// MaxSize bounds an archive (the blob store's single-upload limit).
	MaxSize = blob.MaxSize
)

// Lease is how long a claim of an export lasts.
const Lease = MaxDuration + time.Minute

// CodeInProgress is the code of a request made while the user's previous
// export is pending or running.
const CodeInProgress = "EXPORT_IN_PROGRESS"

// Export is one export of a user's data.
type Export struct {
	ID          string     `json:"id"`
	UserID      string     `json:"-"`
	Status      Status     `json:"status"`
	CreatedAt   time.Time  `json:"createdAt"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	DownloadURL string     `json:"downloadUrl,omitempty"`
	// DownloadExpiresAt is when DownloadURL stops working.
	DownloadExpiresAt *time.Time `json:"downloadExpiresAt,omitempty"`
	Error             string     `json:"error,omitempty"`
	// Attempts counts the claims; LeaseUntil ends the current one.
	Attempts   int       `json:"-"`
	LeaseUntil time.Time `json:"-"`
	// Size is the archive's length in bytes, once completed.
	Size int64 `json:"size,omitempty"`
}

// Key returns the blob key of userID's export id.
func Key(userID, id string) string { return blob.PrefixExports + userID + "/" + id + ".zip" }

// Prefix returns the blob prefix of userID's exports.
func Prefix(userID string) string { return blob.PrefixExports + userID + "/" }

// Store keeps the exports.
type Store interface {
	// CreateExport queues e (pending), unless e's user has an export
	// pending or running: Conflict EXPORT_IN_PROGRESS then, decided by a
	// conditional write.
	CreateExport(ctx context.Context, e Export) error
	// ExportInProgress reports whether userID has an export pending or
	// running, by a strongly consistent read.
	ExportInProgress(ctx context.Context, userID string) (bool, error)
	// Export returns userID's export id. NotFound EXPORT_NOT_FOUND.
	Export(ctx context.Context, userID, id string) (Export, error)
	// QueuedExports returns up to limit queued exports (pending, or
	// running under a lease that may have run out), oldest first.
	QueuedExports(ctx context.Context, limit int) ([]Export, error)
	// ClaimExport marks e running until until and counts the attempt,
	// when e is still as read (its Attempts) and pending or its lease
	// ended before now. Conflict when another claim won.
	ClaimExport(ctx context.Context, e Export, now, until time.Time) error
	// FinishExport records e's end (completed or failed), takes it off
	// the queue and frees its user for the next export, when e is the
	// claim of attempt e.Attempts. Conflict when it is not.
	FinishExport(ctx context.Context, e Export) error
}

// Service requests exports and reports on them.
type Service struct {
	store Store
	blobs blob.Store
	now   func() time.Time
	audit *audit.Log
}

// NewService returns a Service over st, presigning downloads from blobs;
// now nil means time.Now.
func NewService(st Store, blobs blob.Store, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: st, blobs: blobs, now: now}
}

// WithAudit makes s record each request (export_requested) in l.
func (s *Service) WithAudit(l *audit.Log) *Service {
	s.audit = l
	return s
}

// Request queues an export of the signed-in user's data. Errors:
// Unauthenticated without a session; Conflict EXPORT_IN_PROGRESS while
// another is pending or running.
func (s *Service) Request(ctx context.Context) (Export, error) {
	const op = "export.Request"
	uid := auth.UserID(ctx)
	if uid == "" {
		return Export{}, errs.E(op, errs.Unauthenticated, "UNAUTHENTICATED", "sign in first")
	}
	e := Export{ID: uuid.NewString(), UserID: uid, Status: Pending, CreatedAt: s.now().UTC()}
	if err := s.store.CreateExport(ctx, e); err != nil {
		return Export{}, errs.Wrap(op, err)
	}
	s.audit.Record(ctx, uid, audit.ExportRequested, map[string]any{"exportId": e.ID})
	return e, nil
}

// CheckIdle returns Conflict EXPORT_IN_PROGRESS, the error Request would
// return, while the signed-in user has an export pending or running, so
// that a request refused for that is not counted against the rate limit.
func (s *Service) CheckIdle(ctx context.Context) error {
	const op = "export.CheckIdle"
	uid := auth.UserID(ctx)
	if uid == "" {
		return errs.E(op, errs.Unauthenticated, "UNAUTHENTICATED", "sign in first")
	}
	busy, err := s.store.ExportInProgress(ctx, uid)
	if err != nil {
		return errs.Wrap(op, err)
	}
	if busy {
		return errs.E(op, errs.Conflict, CodeInProgress, "an export of this account is already pending or running; wait for it to finish")
	}
	return nil
}

// Get returns the signed-in user's export id, with a download URL once
// completed. NotFound EXPORT_NOT_FOUND for another user's or a missing
// one.
func (s *Service) Get(ctx context.Context, id string) (Export, error) {
	const op = "export.Get"
	e, err := s.store.Export(ctx, auth.UserID(ctx), id)
	if err != nil {
		return Export{}, errs.Wrap(op, err)
	}
	if e.Status == Completed {
		p, err := s.blobs.PresignGet(ctx, Key(e.UserID, e.ID), DownloadTTL)
		if err != nil {
			return Export{}, errs.Wrap(op, err)
		}
		e.DownloadURL, e.DownloadExpiresAt = p.URL, &p.ExpiresAt
	}
	return e, nil
}

// Archive is the zip an export writes. Its methods fail once the archive
// passed MaxSize.
type Archive struct {
	zw   *zip.Writer
	size *countingWriter
}

// NewArchive returns an Archive writing a zip to w; Close ends it.
func NewArchive(w io.Writer) *Archive {
	cw := &countingWriter{w: w}
	return &Archive{zw: zip.NewWriter(cw), size: cw}
}

// Close writes the zip's directory; Size is the archive's length after.
func (a *Archive) Close() error { return a.zw.Close() }

// Size returns the bytes written so far.
func (a *Archive) Size() int64 { return a.size.n }

// JSON adds the file name holding v as indented JSON.
func (a *Archive) JSON(name string, v any) error {
	w, err := a.create(name, zip.Deflate)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Object adds the file name holding one JSON object whose members fn
// writes in order through o: each member's value is encoded as it is
// added, an array's elements one at a time (Object.Array), so that a file
// of any length is never held in memory.
func (a *Archive) Object(name string, fn func(o *Object) error) error {
	w, err := a.create(name, zip.Deflate)
	if err != nil {
		return err
	}
	o := &Object{w: w, a: a}
	if _, err := io.WriteString(w, "{"); err != nil {
		return err
	}
	if err := fn(o); err != nil {
		return err
	}
	end := "}\n"
	if o.n > 0 {
		end = "\n}\n"
	}
	_, err = io.WriteString(w, end)
	return err
}

// Array adds the file name holding one JSON array whose elements fn adds
// one at a time through add (Object.Array's elements, as a file).
func (a *Archive) Array(name string, fn func(add func(v any) error) error) error {
	w, err := a.create(name, zip.Deflate)
	if err != nil {
		return err
	}
	if err := writeArray(w, a, "", fn); err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n")
	return err
}

// Object writes the members of one JSON object of an Archive's file.
type Object struct {
	w io.Writer
	a *Archive
	n int
}

// Field adds the member key with the value v.
func (o *Object) Field(key string, v any) error {
	if err := o.key(key); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return err
	}
	_, err = o.w.Write(b)
	return err
}

// Array adds the member key, an array whose elements fn adds one at a
// time through add, each written as it comes.
func (o *Object) Array(key string, fn func(add func(v any) error) error) error {
	if err := o.key(key); err != nil {
		return err
	}
	return writeArray(o.w, o.a, "  ", fn)
}

func (o *Object) key(key string) error {
	k, err := json.Marshal(key)
	if err != nil {
		return err
	}
	sep := ",\n  "
	if o.n == 0 {
		sep = "\n  "
	}
	o.n++
	_, err = fmt.Fprintf(o.w, "%s%s: ", sep, k)
	return err
}

// writeArray writes a JSON array, indented by indent, its elements from
// fn; it fails once the archive passed MaxSize.
func writeArray(w io.Writer, a *Archive, indent string, fn func(add func(v any) error) error) error {
	if _, err := io.WriteString(w, "["); err != nil {
		return err
	}
	n := 0
	err := fn(func(v any) error {
		if a.size.n > MaxSize {
			return errTooLarge
		}
		b, err := json.MarshalIndent(v, indent+"  ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n" + indent + "  "
		if n == 0 {
			sep = "\n" + indent + "  "
		}
		n++
		if _, err := io.WriteString(w, sep); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	end := "]"
	if n > 0 {
		end = "\n" + indent + "]"
	}
	_, err = io.WriteString(w, end)
	return err
}

// Copy adds the file name holding what r reads, streamed.
func (a *Archive) Copy(name string, r io.Reader) error {
	w, err := a.create(name, zip.Deflate)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, r)
	return err
}

func (a *Archive) create(name string, method uint16) (io.Writer, error) {
	if a.size.n > MaxSize {
		return nil, errTooLarge
	}
	return a.zw.CreateHeader(&zip.FileHeader{Name: name, Method: method, Modified: time.Now().UTC()})
}

var errTooLarge = errs.E("export.Archive", errs.Invalid, "EXPORT_TOO_LARGE", fmt.Sprintf("the export is larger than %d bytes", int64(MaxSize)))

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Section is one part of an export: it adds the user's data of one kind
// to the archive. It reads what it writes as a stream, or page by page.
type Section struct {
	Name  string
	Write func(ctx context.Context, userID string, a *Archive) error
}

// Runner writes the queued exports.
type Runner struct {
	store    Store
	blobs    blob.Backend
	sections []Section
	now      func() time.Time
	logger   *slog.Logger
	tempDir  string
}

// NewRunner returns a Runner writing each export's sections in order to
// blobs. now nil means time.Now, logger nil slog.Default(); the archive is
// spooled in tempDir ("" : the system's).
func NewRunner(st Store, blobs blob.Backend, now func() time.Time, logger *slog.Logger, tempDir string, sections ...Section) *Runner {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Runner{store: st, blobs: blobs, sections: sections, now: now, logger: logger, tempDir: tempDir}
}

// Sweep writes up to MaxPerSweep queued exports whose turn it is and
// returns how many it finished (completed or failed). An export whose
// writing failed is retried by a later sweep until MaxAttempts, then
// failed; the error returned is the first storage error.
func (r *Runner) Sweep(ctx context.Context) (int, error) {
	es, err := r.store.QueuedExports(ctx, 100)
	if err != nil {
		return 0, errs.Wrap("export.Sweep", err)
	}
	n, started := 0, 0
	var first error
	for _, e := range es {
		if started == MaxPerSweep {
			break
		}
		now := r.now()
		if e.Status == Running && e.LeaseUntil.After(now) {
			continue // a live attempt
		}
		started++
		done, err := r.run(ctx, e, now)
		if err != nil {
			r.logger.ErrorContext(ctx, "export failed; it stays queued", "user", e.UserID, "export", e.ID, "err", err)
			if first == nil {
				first = err
			}
		}
		if done {
			n++
		}
	}
	return n, first
}

// run claims e and writes it; it reports whether e ended.
func (r *Runner) run(ctx context.Context, e Export, now time.Time) (bool, error) {
	if e.Attempts >= MaxAttempts {
		e.Status, e.Error = Failed, fmt.Sprintf("the export did not finish in %d attempts", MaxAttempts)
		return true, r.finish(ctx, e)
	}
	// An attempt ends within MaxDuration and before the sweep's own
	// deadline (a Lambda's timeout), whichever is first.
	limit := MaxDuration
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(dl)-30*time.Second)
	}
	if limit < time.Minute {
		return false, nil // too little time left in this sweep: the next one
	}
	if err := r.store.ClaimExport(ctx, e, now, now.Add(Lease)); err != nil {
		if errs.Is(err, errs.Conflict) {
			return false, nil // another sweep has it
		}
		return false, err
	}
	e.Attempts++
	wctx, cancel := context.WithTimeout(auth.ActingFor(ctx, e.UserID), limit)
	defer cancel()
	size, err := r.write(wctx, e)
	if err != nil {
		if ctx.Err() != nil {
			return false, err // the sweep itself ended: retried after the lease
		}
		// A section's failure is retried (its cause may pass) until the
		// last attempt; too large or too slow is final.
		final := e.Attempts >= MaxAttempts || errs.CodeOf(err) == "EXPORT_TOO_LARGE" || wctx.Err() != nil
		if !final {
			return false, err
		}
		e.Status = Failed
		switch {
		case errs.CodeOf(err) == "EXPORT_TOO_LARGE":
			e.Error = fmt.Sprintf("the account's data is larger than an export can hold (%d bytes)", int64(MaxSize))
		case wctx.Err() != nil:
			e.Error = fmt.Sprintf("the export did not finish within %s", limit.Round(time.Second))
		default:
			e.Error = "the export could not be written; request a new one"
		}
		r.logger.ErrorContext(ctx, "export failed", "user", e.UserID, "export", e.ID, "err", err)
		return true, r.finish(ctx, e)
	}
	at := r.now().UTC()
	e.Status, e.CompletedAt, e.Size = Completed, &at, size
	return true, r.finish(ctx, e)
}

// finish records e's end. When e is no longer there to finish (its
// account was erased meanwhile), a zip it wrote is deleted: an attempt's
// write ends within MaxDuration, before its lease, so no later attempt
// writes that key yet.
func (r *Runner) finish(ctx context.Context, e Export) error {
	err := r.store.FinishExport(ctx, e)
	if errs.Is(err, errs.Conflict) {
		if e.Status == Completed {
			return r.blobs.Delete(ctx, Key(e.UserID, e.ID))
		}
		return nil
	}
	return err
}

// write writes e's archive to a temporary file, then the file to the
// blob store under Key, replacing an earlier attempt's.
func (r *Runner) write(ctx context.Context, e Export) (int64, error) {
	const op = "export.write"
	f, err := os.CreateTemp(r.tempDir, "export-*.zip")
	if err != nil {
		return 0, errs.E(op, errs.Internal, "", "internal error").WithCause(err)
	}
	defer func() { _ = f.Close(); _ = os.Remove(f.Name()) }()
	a := NewArchive(f)
	for _, s := range r.sections {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := s.Write(ctx, e.UserID, a); err != nil {
			return 0, errs.Wrap(op, fmt.Errorf("%s: %w", s.Name, err))
		}
	}
	if err := a.Close(); err != nil {
		return 0, errs.E(op, errs.Internal, "", "internal error").WithCause(err)
	}
	size := a.Size()
	if size > MaxSize {
		return 0, errs.E(op, errs.Invalid, "EXPORT_TOO_LARGE", "the export is too large")
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, errs.E(op, errs.Internal, "", "internal error").WithCause(err)
	}
	if _, err := r.blobs.Put(ctx, Key(e.UserID, e.ID), f, blob.PutOptions{ContentType: "application/zip", Size: size}); err != nil {
		return 0, errs.Wrap(op, err)
	}
	return size, nil
}
