package dynamolocal

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// The journal file format (DATA_FILE + ".journal"). It starts with
// journalMagic; then records follow, each framed as
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
// records after it are replayed in order. A crash while appending leaves
// a torn last record (a prefix of the last write to the file, never
// answered): it is dropped, and the file truncated after the last whole
// record. A record that fails its checksum with more data after it is
// corruption: the start stops with an error naming the file and the
// offset, and the file is left as it is.
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
}

// mark is a position in the journal: the records up to lsn end at
// offset bytes after the magic (in the file or still in the buffer).
type mark struct {
	lsn    uint64
	offset int64
}

// openJournal opens the journal at path for appending after its valid
// records (end bytes after the magic; the rest, a torn record, is cut
// off), creating it when missing. last is the lsn of the last record.
func openJournal(path string, end int64, last uint64) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	want := int64(len(journalMagic)) + end
	if info.Size() < int64(len(journalMagic)) {
		// New, or torn while its magic was written: start it afresh.
		if err := f.Truncate(0); err == nil {
			_, err = f.WriteAt([]byte(journalMagic), 0)
		}
		if err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = syncDir(filepath.Dir(path))
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	} else if info.Size() != want {
		if err := f.Truncate(want); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
	}
	if _, err := f.Seek(want, io.SeekStart); err != nil {
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
		payload := mustJSON(r)
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
		j.mu.Unlock()
		_, err := f.Write(buf)
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

// readJournal reads the journal at path: its whole records, and end, the
// bytes they take after the magic. A missing file has none. A torn last
// record is left out (torn reports it). Corruption before the end, an
// unknown magic or records out of sequence are errors naming the offset.
func readJournal(path string) (recs []journalRecord, end int64, torn bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	if len(b) < len(journalMagic) {
		if bytes.HasPrefix([]byte(journalMagic), b) {
			return nil, 0, len(b) > 0, nil // torn while created
		}
		return nil, 0, false, errors.New("not a dynamolocal journal")
	}
	if !bytes.HasPrefix(b, []byte(journalMagic)) {
		return nil, 0, false, errors.New("not a dynamolocal journal")
	}
	zeros := func(p []byte) bool { return len(bytes.Trim(p, "\x00")) == 0 }
	off := len(journalMagic)
	var prev uint64
	for off < len(b) {
		rest := b[off:]
		if len(rest) < recordHeader {
			return recs, int64(off - len(journalMagic)), true, nil
		}
		size := binary.LittleEndian.Uint32(rest[0:])
		lsn := binary.LittleEndian.Uint64(rest[4:])
		if crc32.Checksum(rest[:12], castagnoli) != binary.LittleEndian.Uint32(rest[12:]) {
			if zeros(rest) {
				return recs, int64(off - len(journalMagic)), true, nil
			}
			return nil, 0, false, fmt.Errorf("corrupt record header at offset %d", off)
		}
		if size > maxRecordSize {
			return nil, 0, false, fmt.Errorf("corrupt record at offset %d: length %d", off, size)
		}
		if int(size) > len(rest)-recordHeader {
			return recs, int64(off - len(journalMagic)), true, nil // cut short by a crash
		}
		payload := rest[recordHeader : recordHeader+int(size)]
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(rest[16:]) {
			if zeros(rest[recordHeader+int(size):]) {
				return recs, int64(off - len(journalMagic)), true, nil
			}
			return nil, 0, false, fmt.Errorf("corrupt record at offset %d (lsn %d): checksum mismatch", off, lsn)
		}
		if prev != 0 && lsn != prev+1 {
			return nil, 0, false, fmt.Errorf("record at offset %d has lsn %d after %d", off, lsn, prev)
		}
		var r record
		if err := json.Unmarshal(payload, &r); err != nil || r.Op == "" {
			return nil, 0, false, fmt.Errorf("corrupt record at offset %d (lsn %d): %v", off, lsn, err)
		}
		recs = append(recs, journalRecord{record: r, lsn: lsn, offset: int64(off)})
		prev = lsn
		off += recordHeader + int(size)
	}
	return recs, int64(off - len(journalMagic)), false, nil
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
