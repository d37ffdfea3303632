package dynamolocal

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// The journal file format (DATA_FILE + ".journal"). It starts with its
// header, journalMagic; then records follow, each framed as
//
//	length  uint32 LE   payload bytes
//	lsn     uint64 LE   the write's sequence number, one more than the previous record's
//	hcrc    uint32 LE   CRC-32C of length and lsn
//	pcrc    uint32 LE   CRC-32C of the payload
//	payload             a record: {"op":"PutItem","body":{<the request as applied>}}
//
// A record is appended, and the file synced, before its write is
// answered; several concurrent writers share one sync (group commit).
// The snapshot records the lsn of the last write it holds; at start the
// records after it are replayed in order.
//
// A journal file always holds its header: a new one is written whole
// (header and records, if any) to a temporary file, synced and renamed
// into place, both when it is created at the first start and when it
// is compacted; it is never cut shorter than its header. So an
// empty (0-byte) file, or one whose first bytes are not the header, is
// damage, never the trace of a crash.
//
// What a crash can leave: records are only appended, with sequential
// writes, and a write is answered only once the sync that covers it
// returned. A crash (kill -9, power loss on a file system that keeps an
// interrupted append a prefix of what was written, as ext4, XFS, APFS
// do) leaves every answered record whole, followed at most by a prefix
// of the last, unanswered append: whole records, then a record cut short.
// readJournal therefore reads, after the header:
//
//   - fewer than recordHeader bytes at the end: a header cut short by a
//     crash (torn);
//   - a whole header whose hcrc fails: corruption, even at the end. hcrc
//     covers length and lsn, so a damaged length is never taken for a
//     record cut short, and a crash cannot leave a whole but wrong header;
//   - a header that passes hcrc and declares a payload the file ends
//     before: a record cut short (torn); a length over maxRecordSize, or
//     an lsn out of sequence, is corruption (never written);
//   - a payload whose declared bytes are all there but fail pcrc:
//     corruption, also when it is the last record (a crash leaves a
//     prefix, not changed bytes).
//
// A torn record is dropped and the file truncated after the last whole
// record. Corruption stops the start with an error naming the file and
// the offset of the damaged header or record, and nothing is written
// (byte for byte: the engine does not open the file for writing). A
// file system that, after a power loss, shows a grown file filled with
// zeros breaks the prefix assumption: its journal stops the start too,
// rather than losing a write silently.
const (
	journalMagic  = "dynamolocal-journal 1\n"
	recordHeader  = 4 + 8 + 4 + 4
	maxRecordSize = 64 << 20 // larger than any request body (16 MiB)
	// compactAt is the journal size that triggers a snapshot before the
	// next interval.
	compactAt = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errCrashed = errors.New("engine crashed (test)")

// journal appends write records to the journal file with group commit.
type journal struct {
	path string

	mu       sync.Mutex
	cond     *sync.Cond
	f        *os.File
	size     int64  // bytes of records in the file, after the magic
	buf      []byte // records appended, not yet written
	last     uint64 // lsn of the last record appended
	durable  uint64 // lsn of the last record synced
	flushing bool   // a writer is writing and syncing; others wait
	inflight int64  // bytes being written by the flushing writer (in neither size nor buf)
	err      error  // sticky: once the journal fails, it refuses writes
	full     chan struct{}
	// beforeFlush, when set, is called (once, then cleared) by the next
	// flush before it writes; an error fails the flush as a crash before
	// the write would (tests: StallJournal).
	beforeFlush func() error
}

// mark is a position in the journal: the records up to lsn end at
// offset bytes after the magic (in the file or still in the buffer).
type mark struct {
	lsn    uint64
	offset int64
}

// openJournal opens the journal at path for appending after its valid
// records (end bytes after the header; the rest, a torn record, is cut
// off). When the file does not exist (exists false) it is created
// holding its header, atomically, so that no crash leaves a journal
// without its header. last is the lsn of the last record.
func openJournal(path string, exists bool, end int64, last uint64) (*journal, error) {
	var f *os.File
	var err error
	if !exists {
		f, err = writeJournalFile(path, nil)
	} else {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	}
	if err != nil {
		return nil, err
	}
	want := int64(len(journalMagic)) + end
	info, err := f.Stat()
	if err == nil && info.Size() != want {
		// A torn record at the end (readJournal validated the rest).
		if err = f.Truncate(want); err == nil {
			err = f.Sync()
		}
	}
	if err == nil {
		_, err = f.Seek(want, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	j := &journal{path: path, f: f, size: end, last: last, durable: last, full: make(chan struct{}, 1)}
	j.cond = sync.NewCond(&j.mu)
	return j, nil
}

// failed is the journal's sticky error; nil for no journal.
func (j *journal) failed() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// append adds records to the buffer and returns the lsn of the last one.
// Callers hold the handler's exclusive lock, so records are in the order
// their writes were applied.
func (j *journal) append(recs ...record) uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range recs {
		payload := r.encode()
		j.last++
		var h [recordHeader]byte
		binary.LittleEndian.PutUint32(h[0:], uint32(len(payload)))
		binary.LittleEndian.PutUint64(h[4:], j.last)
		binary.LittleEndian.PutUint32(h[12:], crc32.Checksum(h[:12], castagnoli))
		binary.LittleEndian.PutUint32(h[16:], crc32.Checksum(payload, castagnoli))
		j.buf = append(j.buf, h[:]...)
		j.buf = append(j.buf, payload...)
	}
	if j.size+int64(len(j.buf)) > compactAt {
		select {
		case j.full <- struct{}{}:
		default:
		}
	}
	return j.last
}

// wait returns once the record lsn is on disk. The first waiter writes
// and syncs everything appended so far; those arriving meanwhile wait and
// are served by the next sync, together.
func (j *journal) wait(lsn uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.durable < lsn {
		if j.err != nil {
			return j.err
		}
		if j.flushing {
			j.cond.Wait()
			continue
		}
		j.flushing = true
		buf, upto, f := j.buf, j.last, j.f
		j.buf, j.inflight = nil, int64(len(buf))
		hook := j.beforeFlush
		j.beforeFlush = nil
		j.mu.Unlock()
		var err error
		if hook != nil {
			err = hook()
		}
		if err == nil {
			_, err = f.Write(buf)
		}
		if err == nil {
			err = f.Sync()
		}
		j.mu.Lock()
		j.flushing, j.inflight = false, 0
		if err != nil && j.err == nil {
			j.err = fmt.Errorf("journal %s: %w", j.path, err)
		}
		if err == nil {
			j.size += int64(len(buf))
			j.durable = max(j.durable, upto)
		}
		j.cond.Broadcast()
	}
	return nil
}

// idle waits until no writer is flushing; callers hold j.mu.
func (j *journal) idle() {
	for j.flushing {
		j.cond.Wait()
	}
}

// mark returns the current end of the journal. Callers hold the
// handler's exclusive lock, so that the mark matches the data.
func (j *journal) mark() mark {
	j.mu.Lock()
	defer j.mu.Unlock()
	// Bytes a concurrent flush is writing are part of the journal too:
	// they end up in the file before the compaction that uses this mark
	// reads it (compact waits for the flush).
	return mark{lsn: j.last, offset: j.size + j.inflight + int64(len(j.buf))}
}

// lastLSN is the lsn of the last record appended.
func (j *journal) lastLSN() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// compact drops the records up to m, which a snapshot now holds: the
// records after m are written to a new file that replaces the journal
// atomically. A crash at any point leaves either journal, and both replay
// to the same data on that snapshot (records up to its lsn are skipped).
func (j *journal) compact(m mark) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.idle()
	if j.err != nil {
		return j.err
	}
	var tail []byte
	if m.offset < j.size {
		tail = make([]byte, j.size-m.offset)
		if _, err := j.f.ReadAt(tail, int64(len(journalMagic))+m.offset); err != nil {
			return fmt.Errorf("journal %s: read: %w", j.path, err)
		}
	}
	tail = append(tail, j.buf[max(0, m.offset-j.size):]...)
	f, err := writeJournalFile(j.path, tail)
	if err != nil {
		return fmt.Errorf("journal %s: compact: %w", j.path, err)
	}
	j.f.Close()
	j.f, j.size, j.buf, j.durable = f, int64(len(tail)), nil, j.last
	j.cond.Broadcast()
	return nil
}

// writeJournalFile replaces the journal at path, atomically, by one
// holding records, and returns it open for appending.
func writeJournalFile(path string, records []byte) (*os.File, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	if _, err := f.Write(append([]byte(journalMagic), records...)); err != nil {
		return fail(err)
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := syncDir(dir); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// close syncs what was appended and closes the file.
func (j *journal) close() error {
	j.mu.Lock()
	last := j.last
	j.mu.Unlock()
	err := j.wait(last)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.idle()
	if j.err == nil {
		j.err = errors.New("journal closed")
	}
	j.cond.Broadcast()
	return errors.Join(err, j.f.Close())
}

// crash closes the file without writing what was not yet written, as a
// killed process would (tests).
func (j *journal) crash() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.idle()
	j.err = errCrashed
	j.buf = nil
	j.f.Close()
	j.cond.Broadcast()
}

// journalRecord is a record read back from the journal.
type journalRecord struct {
	record
	lsn    uint64
	offset int64 // of its header in the file
}

// corruptError is damage found in a data file or journal at start, a
// state no crash leaves: what is wrong and the byte offset where.
type corruptError struct {
	offset int64
	what   string
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("corrupt at offset %d: %s", e.offset, e.what)
}

func corruptAt(offset int, format string, args ...any) error {
	return &corruptError{offset: int64(offset), what: fmt.Sprintf(format, args...)}
}

// tornTail describes a record cut short at the end of the journal.
type tornTail struct {
	offset int64 // of the torn record in the file
	bytes  int64 // how many of its bytes were written
}

// readJournal reads the journal at path (see the format comment): its
// whole records, and end, the bytes they take after the header. A torn
// last record is left out and described by torn (nil if none). It fails
// with an error wrapping fs.ErrNotExist when there is no file, and with a
// *corruptError for damage: an empty file, a missing or changed header,
// a record that fails its checksum (the last one too), records out of
// sequence or that are not records.
func readJournal(path string) (recs []journalRecord, end int64, torn *tornTail, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, nil, err
	}
	if len(b) == 0 {
		return nil, 0, nil, corruptAt(0, "the file is empty (0 bytes); a journal always holds at least its %d-byte header %q", len(journalMagic), journalMagic)
	}
	if !bytes.HasPrefix(b, []byte(journalMagic)) {
		i := 0
		for i < len(b) && i < len(journalMagic) && b[i] == journalMagic[i] {
			i++
		}
		if i == len(b) {
			return nil, 0, nil, corruptAt(i, "the file ends inside the journal header %q (%d bytes)", journalMagic, len(b))
		}
		return nil, 0, nil, corruptAt(i, "not a dynamolocal journal: the header %q is missing or changed", journalMagic)
	}
	off := len(journalMagic)
	var prev uint64
	for off < len(b) {
		rest := b[off:]
		if len(rest) < recordHeader {
			// Only a crash while the header was appended leaves this.
			return recs, int64(off - len(journalMagic)), &tornTail{offset: int64(off), bytes: int64(len(rest))}, nil
		}
		size := binary.LittleEndian.Uint32(rest[0:])
		lsn := binary.LittleEndian.Uint64(rest[4:])
		if crc32.Checksum(rest[:12], castagnoli) != binary.LittleEndian.Uint32(rest[12:]) {
			return nil, 0, nil, corruptAt(off, "record header fails its checksum (its length, sequence number or checksum changed; a crash leaves a header whole or cut short, never changed)")
		}
		if size > maxRecordSize {
			return nil, 0, nil, corruptAt(off, "record (write %d) declares %d bytes, more than a record can hold", lsn, size)
		}
		if prev != 0 && lsn != prev+1 {
			return nil, 0, nil, corruptAt(off, "record has write number %d after %d", lsn, prev)
		}
		if int(size) > len(rest)-recordHeader {
			// The file ends before the declared payload: cut short by a crash.
			return recs, int64(off - len(journalMagic)), &tornTail{offset: int64(off), bytes: int64(len(rest))}, nil
		}
		payload := rest[recordHeader : recordHeader+int(size)]
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(rest[16:]) {
			return nil, 0, nil, corruptAt(off, "record (write %d) fails its checksum: its %d payload bytes are all there, so no crash cut it short; they or its checksum changed", lsn, size)
		}
		var r record
		if err := json.Unmarshal(payload, &r); err != nil || r.Op == "" {
			return nil, 0, nil, corruptAt(off, "record (write %d) is not a write request (%v)", lsn, cmp.Or(err, errors.New("no op")))
		}
		recs = append(recs, journalRecord{record: r, lsn: lsn, offset: int64(off)})
		prev = lsn
		off += recordHeader + int(size)
	}
	return recs, int64(off - len(journalMagic)), nil, nil
}

// syncDir makes a rename or creation in dir durable; not every platform
// can sync a directory, so failing to open one is not an error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
