package dynamolocal

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Options configure StartWith.
type Options struct {
	// DataFile, when set, keeps the engine's data across restarts and
	// crashes, in two files: the snapshot DataFile and the journal
	// DataFile + ".journal". StartWith restores every table from the
	// snapshot and replays the journal's later records before serving;
	// no snapshot and no journal means start empty. Every successful write
	// is appended to the journal and synced to disk before it is answered,
	// so no answered write is lost, even to kill -9. Every Interval (when
	// something changed), when the journal passes 64 MiB, and at Close,
	// the data is written to DataFile as a snapshot and the journal
	// compacted to its header. Both files carry checksums: damage no
	// crash leaves (a changed or cut snapshot, a journal record that fails
	// its checksum, even the last one, an empty or headerless journal, a
	// journal missing beside a snapshot saved with one) stops StartWith
	// with an error naming the file and the byte offset, and the files are
	// left untouched; only a record cut short at the end of the journal, a
	// crash's unanswered write, is dropped. A snapshot of an older format
	// (no checksum) is read, then rewritten in the current one at start.
	// Empty: in memory only. A name ending in .gz is gzip-compressed (the
	// journal is not). DataFile + ".lock" keeps a second engine from using
	// the same files.
	DataFile string
	// Interval is the time between snapshots of DataFile that fold the
	// journal into it; zero or negative folds it only at Close and when
	// it passes 64 MiB.
	Interval time.Duration
	// Logger receives restore and save messages; nil means slog.Default().
	Logger *slog.Logger
	// Addr is the address to serve on; empty means a free port on the
	// loopback interface (127.0.0.1:0).
	Addr string
	// Wrap, when set, wraps the engine's HTTP handler: it sees every
	// request first (the local stack's IAM check, iampolicy.Guard).
	Wrap func(http.Handler) http.Handler
}

// SnapshotInfo summarizes a snapshot file.
type SnapshotInfo struct {
	Path    string
	SavedAt time.Time
	Tables  int
	Items   int
	// Replayed is the number of journaled writes replayed on top of the
	// snapshot at start.
	Replayed int
}

// The snapshot file format. Version 3 is a JSON object, followed by a
// checksum trailer as its last line:
//
//	{"format":"dynamolocal-snapshot","version":3,"savedAt":"<RFC 3339>","journalLSN":<n>,"journal":true,"tables":[
//	{"name":"t","createdAt":"<RFC 3339>","definition":{<CreateTable request>},
//	 "timeToLive":{"AttributeName":"expiresAt","Enabled":true},"items":[
//	{<item in DynamoDB JSON>},
//	...
//	]},
//	...
//	]
//	,"checksum":{"algorithm":"crc32c","size":<n>,"blockSize":65536,"blocks":["<8 hex digits>",...]}}
//
// definition is the CreateTable request that recreates the table as it is
// now (key schema, attribute definitions, billing, throughput, GSIs and LSIs
// with their projections, including indexes added by UpdateTable);
// timeToLive is absent when TTL is disabled. Items are attribute-value maps
// exactly as DynamoDB's JSON protocol writes them, so every type round-trips
// unchanged: numbers keep their digits, B and BS stay base64, sets stay sets,
// and empty lists, maps and binaries keep their type even though the engine
// answers them as NULL. journalLSN is the sequence number of the last
// journaled write the snapshot holds: at start, only the journal's later
// records are replayed. journal is true in the snapshots of a data file:
// its journal must exist beside it (a snapshot written elsewhere with
// Engine.Snapshot has none).
//
// The trailer, the file's last line, checksums everything before it:
// size is the number of those bytes (the object up to the newline after
// the tables), and blocks the CRC-32C of each blockSize bytes of them,
// in order (the last block shorter), so that damage is located to a
// block. It is still one JSON object, readable by any JSON tool. A .gz
// file is checksummed on its uncompressed content (gzip's own CRC is
// checked too). Readers verify the trailer byte for byte before they
// parse the JSON; a version 3 file without it is refused (cut short or
// damaged).
//
// Versions 1 (no journal) and 2 (journal, no checksum) are the formats of
// earlier builds; they are read, unverified, and StartWith rewrites such
// a data file as version 3 before serving, so it is read unchecked only
// once. Readers reject other formats and versions (an older build refuses
// a version 3 file rather than misread it).
const (
	snapshotFormat  = "dynamolocal-snapshot"
	snapshotVersion = 3
	// snapshotBlock is the bytes per checksum of a snapshot.
	snapshotBlock = 64 << 10
	// checksumPrefix starts the trailer line of a version 3 snapshot.
	checksumPrefix = `,"checksum":`
)

type snapshotFile struct {
	Format     string    `json:"format"`
	Version    int       `json:"version"`
	SavedAt    time.Time `json:"savedAt"`
	JournalLSN uint64    `json:"journalLSN"`
	// Journal is set in the snapshots of a data file: its journal must
	// exist beside it.
	Journal bool            `json:"journal,omitempty"`
	Tables  []snapshotTable `json:"tables"`
}

type snapshotTable struct {
	Name       string            `json:"name"`
	CreatedAt  time.Time         `json:"createdAt"`
	Definition tableDef          `json:"definition"`
	TimeToLive *ttlSpec          `json:"timeToLive,omitempty"`
	Items      []json.RawMessage `json:"items"`
}

// tableDef is a CreateTable request.
type tableDef struct {
	TableName              string
	AttributeDefinitions   json.RawMessage `json:",omitempty"`
	KeySchema              []keyElem
	BillingMode            string      `json:",omitempty"`
	ProvisionedThroughput  *capacity   `json:",omitempty"`
	GlobalSecondaryIndexes []indexSpec `json:",omitempty"`
	LocalSecondaryIndexes  []indexSpec `json:",omitempty"`
}

type indexSpec struct {
	IndexName  string
	KeySchema  []keyElem
	Projection struct {
		ProjectionType   string
		NonKeyAttributes []string `json:",omitempty"`
	}
	ProvisionedThroughput *capacity `json:",omitempty"`
}

type ttlSpec struct {
	AttributeName string
	Enabled       bool
}

func (s *snapshotFile) info(path string) *SnapshotInfo {
	in := &SnapshotInfo{Path: path, SavedAt: s.SavedAt, Tables: len(s.Tables)}
	for _, t := range s.Tables {
		in.Items += len(t.Items)
	}
	return in
}

// Snapshot writes every table (definition, TTL setting and items) to path,
// atomically: a new file is written next to it, synced and renamed over it,
// so path always holds a complete snapshot, the old one if writing fails.
// The snapshot is consistent: it is taken while no request is being served,
// so every write is either wholly in it or not at all. The file is created
// with mode 0600 (it holds the application's data); missing directories are
// created. A snapshot to Options.DataFile also compacts the journal (see
// Options); one written elsewhere does not name a journal, so that it
// can serve as another engine's DataFile on its own.
func (e *Engine) Snapshot(path string) error {
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	if e.opts.DataFile != "" && filepath.Clean(path) == filepath.Clean(e.opts.DataFile) {
		_, err := e.compactLocked()
		return err
	}
	_, err := e.snapshotLocked(path, nil)
	return err
}

// Restore loads the snapshot at path into the engine, while no request is
// being served. It fails, changing nothing, if the file cannot be read, is
// not a snapshot, fails its checksum (the error names the offset), or
// names a table the engine already has; a table or item the engine
// rejects stops it midway. The restored data is not journaled: with
// Options.DataFile it is saved by the next snapshot.
func (e *Engine) Restore(path string) error {
	snap, err := readSnapshot(path)
	if err != nil {
		return fmt.Errorf("dynamolocal: restore %s: %w", path, err)
	}
	defer e.writes.Add(1)
	if err := e.h.restore(context.Background(), snap); err != nil {
		return fmt.Errorf("dynamolocal: restore %s: %w", path, err)
	}
	return nil
}

// snapshotLocked captures and writes a snapshot; atLock runs while the
// capture holds every request off. Callers hold e.saveMu.
func (e *Engine) snapshotLocked(path string, atLock func(*snapshotFile)) (*SnapshotInfo, error) {
	snap, err := e.h.capture(context.Background(), atLock)
	if err != nil {
		return nil, fmt.Errorf("dynamolocal: snapshot: %w", err)
	}
	if err := writeAtomic(path, func(w io.Writer) error { return encodeSnapshot(w, snap) }, e.beforeRename); err != nil {
		return nil, fmt.Errorf("dynamolocal: snapshot to %s: %w", path, err)
	}
	return snap.info(path), nil
}

// compactLocked writes a snapshot to Options.DataFile and then drops the
// journal records it holds. Callers hold e.saveMu.
func (e *Engine) compactLocked() (*SnapshotInfo, error) {
	j := e.h.journal
	var m mark
	var changes int64
	info, err := e.snapshotLocked(e.opts.DataFile, func(snap *snapshotFile) {
		if j != nil {
			m = j.mark()
		}
		snap.JournalLSN, snap.Journal = m.lsn, j != nil
		changes = e.writes.Load()
	})
	if err != nil {
		return nil, err
	}
	e.savedLSN, e.saved = m.lsn, changes
	if e.beforeCompact != nil {
		if err := e.beforeCompact(); err != nil {
			return nil, err
		}
	}
	if j != nil {
		if err := j.compact(m); err != nil {
			return nil, fmt.Errorf("dynamolocal: %w", err)
		}
	}
	return info, nil
}

// unchanged reports whether nothing was written since the last snapshot
// of the data file (or the start). Callers hold e.saveMu.
func (e *Engine) unchanged() bool {
	lsn := e.savedLSN
	if j := e.h.journal; j != nil {
		lsn = j.lastLSN()
	}
	return lsn == e.savedLSN && e.writes.Load() == e.saved
}

// saveDataFile snapshots to Options.DataFile, compacting the journal,
// unless nothing was written since the last snapshot (or the start).
func (e *Engine) saveDataFile() error {
	if e.opts.DataFile == "" {
		return nil
	}
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	if e.unchanged() {
		return nil
	}
	info, err := e.compactLocked()
	if err != nil {
		return err
	}
	e.opts.Logger.Debug("dynamolocal: saved snapshot", "file", info.Path, "tables", info.Tables, "items", info.Items)
	return nil
}

// saveEvery snapshots the data file every d (when d > 0) and whenever the
// journal grows past compactAt, until stopSaving.
func (e *Engine) saveEvery(d time.Duration) {
	defer close(e.saverDone)
	var tick <-chan time.Time
	if d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		tick = t.C
	}
	var full <-chan struct{}
	if j := e.h.journal; j != nil {
		full = j.full
	}
	for {
		select {
		case <-e.stopSaver:
			return
		case <-tick:
		case <-full:
		}
		if err := e.saveDataFile(); err != nil {
			e.opts.Logger.Error("dynamolocal: periodic snapshot failed; the journal keeps every write meanwhile; retrying at the next interval", "err", err)
		}
	}
}

// stopSaving stops the periodic saver, waiting for a save in progress.
func (e *Engine) stopSaving() {
	if e.stopSaver != nil {
		close(e.stopSaver)
		<-e.saverDone
		e.stopSaver = nil
	}
}

// openDataFile prepares Options.DataFile at start: it returns the snapshot
// to restore (nil when the file does not exist yet) and checks that the
// file's directory is writable, so a bad path fails now rather than at
// shutdown.
func openDataFile(path string) (*snapshotFile, error) {
	snap, err := readSnapshot(path)
	if errors.Is(err, fs.ErrNotExist) {
		snap, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dynamolocal: data file %s: %w (the files are left untouched: restore it from a copy; moving it and its journal away starts empty)", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dynamolocal: data file %s: %w", path, err)
	}
	probe, err := os.CreateTemp(dir, "."+filepath.Base(path)+".probe-*")
	if err != nil {
		return nil, fmt.Errorf("dynamolocal: data file %s: directory not writable: %w", path, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return snap, nil
}

// readSnapshot reads and validates a snapshot file (plain or gzip
// JSON; see the format comment). Damage is a *corruptError naming the
// offset; a missing file is an error wrapping fs.ErrNotExist.
func readSnapshot(path string) (*snapshotFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		return parseSnapshot(raw)
	}
	data, err := gunzip(raw)
	if err != nil {
		return nil, err
	}
	snap, err := parseSnapshot(data)
	if ce, ok := errors.AsType[*corruptError](err); ok {
		ce.what += " (offset in the uncompressed content)"
	}
	return snap, err
}

// gunzip decompresses a gzip file, checking gzip's CRC; errors name the
// offset in the compressed file where reading stopped.
func gunzip(raw []byte) ([]byte, error) {
	br := bytes.NewReader(raw)
	at := func() int { return len(raw) - br.Len() }
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, corruptAt(at(), "corrupt gzip header: %v", err)
	}
	data, err := io.ReadAll(zr)
	switch {
	case errors.Is(err, gzip.ErrChecksum):
		return nil, corruptAt(at()-8, "gzip: the uncompressed content does not match gzip's checksum")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, corruptAt(at(), "gzip: the compressed stream is cut short")
	case err != nil:
		return nil, corruptAt(at(), "gzip: %v", err)
	}
	return data, nil
}

// parseSnapshot validates a snapshot's content: its checksum trailer
// (version 3), then its JSON.
func parseSnapshot(data []byte) (*snapshotFile, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, corruptAt(0, "empty file, not a snapshot")
	}
	sum, lastLine, err := checkTrailer(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			return nil, corruptAt(int(se.Offset), "invalid JSON: %v", err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, corruptAt(len(data), "invalid JSON: the file ends before the snapshot does (cut short)")
		}
		return nil, fmt.Errorf("read: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		off := int(dec.InputOffset())
		for off < len(data) && strings.ContainsRune(" \t\r\n", rune(data[off])) {
			off++
		}
		return nil, corruptAt(off, "unexpected data after the JSON object")
	}
	var head struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Format != snapshotFormat {
		return nil, corruptAt(0, "not a %s file (format %q)", snapshotFormat, head.Format)
	}
	switch {
	case sum != nil && head.Version == snapshotVersion:
	case sum == nil && head.Version == snapshotVersion:
		return nil, corruptAt(lastLine, "its last line is not the checksum trailer a version %d snapshot ends with (the file is cut short or damaged)", snapshotVersion)
	case sum == nil && (head.Version == 1 || head.Version == 2):
		// An earlier build's format, without checksum.
	default:
		return nil, fmt.Errorf("snapshot version %d is not supported (this build reads versions 1 to %d)", head.Version, snapshotVersion)
	}
	var snap snapshotFile
	if err := json.Unmarshal(raw, &snap); err != nil {
		return nil, fmt.Errorf("corrupt snapshot: %w", err)
	}
	seen := map[string]bool{}
	for i, t := range snap.Tables {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("corrupt snapshot: table %d has no name", i)
		case seen[t.Name]:
			return nil, fmt.Errorf("corrupt snapshot: table %s appears twice", t.Name)
		case len(t.Definition.KeySchema) == 0:
			return nil, fmt.Errorf("corrupt snapshot: table %s has no key schema", t.Name)
		}
		seen[t.Name] = true
		snap.Tables[i].Definition.TableName = t.Name
		for j, item := range t.Items {
			if len(item) == 0 || item[0] != '{' {
				return nil, fmt.Errorf("corrupt snapshot: table %s item %d is not an object", t.Name, j)
			}
		}
	}
	return &snap, nil
}

// snapshotChecksum is the trailer of a version 3 snapshot.
type snapshotChecksum struct {
	Algorithm string   `json:"algorithm"`
	Size      int64    `json:"size"`
	BlockSize int      `json:"blockSize"`
	Blocks    []string `json:"blocks"`
}

// line renders the trailer line.
func (c snapshotChecksum) line() []byte {
	b, err := marshalRaw(c)
	if err != nil {
		panic(err) // strings and numbers only
	}
	return slices.Concat([]byte(checksumPrefix), b, []byte("}\n"))
}

// checkTrailer verifies the checksum trailer of data, if its last line
// is one (sum nil otherwise); lastLine is the offset of that line.
func checkTrailer(data []byte) (sum *snapshotChecksum, lastLine int, err error) {
	lastLine = bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	line := data[lastLine:]
	if !bytes.HasPrefix(line, []byte(checksumPrefix)) {
		return nil, lastLine, nil
	}
	var c snapshotChecksum
	inner, ok := bytes.CutSuffix(line[len(checksumPrefix):], []byte("}\n"))
	dec := json.NewDecoder(bytes.NewReader(inner))
	dec.DisallowUnknownFields()
	if !ok || dec.Decode(&c) != nil || !bytes.Equal(c.line(), line) {
		return nil, lastLine, corruptAt(lastLine, "the checksum trailer is damaged")
	}
	body := data[:lastLine]
	if c.Algorithm != "crc32c" || c.BlockSize <= 0 || c.BlockSize > 1<<30 || len(c.Blocks) != int((c.Size+int64(c.BlockSize)-1)/int64(c.BlockSize)) {
		return nil, lastLine, corruptAt(lastLine, "the checksum trailer is damaged (algorithm %q, %d blocks of %d for %d bytes)", c.Algorithm, len(c.Blocks), c.BlockSize, c.Size)
	}
	for k, want := range c.Blocks {
		lo := k * c.BlockSize
		hi := min(lo+c.BlockSize, len(body), int(c.Size))
		if lo >= hi || fmt.Sprintf("%08x", crc32.Checksum(body[lo:hi], castagnoli)) != want {
			if c.Size != int64(len(body)) {
				return nil, lastLine, corruptAt(min(lo, len(body)), "the checksum covers %d bytes, %d are before it: bytes were removed or added from here on", c.Size, len(body))
			}
			return nil, lastLine, corruptAt(lo, "bytes %d to %d do not match their checksum (changed since written)", lo, hi-1)
		}
	}
	if c.Size != int64(len(body)) {
		return nil, lastLine, corruptAt(int(c.Size), "the checksum covers %d bytes, %d are before it: bytes were added here", c.Size, len(body))
	}
	return &c, lastLine, nil
}

// checksummer passes writes on to w and checksums them in blocks of
// snapshotBlock bytes.
type checksummer struct {
	w      io.Writer
	size   int64
	crc    uint32 // of the current block so far
	blocks []string
}

func (c *checksummer) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	for q := p[:n]; len(q) > 0; {
		k := min(len(q), snapshotBlock-int(c.size%snapshotBlock))
		c.crc = crc32.Update(c.crc, castagnoli, q[:k])
		c.size += int64(k)
		q = q[k:]
		if c.size%snapshotBlock == 0 {
			c.blocks = append(c.blocks, fmt.Sprintf("%08x", c.crc))
			c.crc = 0
		}
	}
	return n, err
}

// sum is the trailer for what was written.
func (c *checksummer) sum() snapshotChecksum {
	blocks := slices.Clip(c.blocks)
	if c.size%snapshotBlock != 0 {
		blocks = append(blocks, fmt.Sprintf("%08x", c.crc))
	}
	return snapshotChecksum{Algorithm: "crc32c", Size: c.size, BlockSize: snapshotBlock, Blocks: blocks}
}

// encodeSnapshot writes snap as JSON, one table header and one item per
// line, then the checksum trailer.
func encodeSnapshot(w io.Writer, snap *snapshotFile) error {
	cs := &checksummer{w: w}
	bw := bufio.NewWriter(cs)
	// open writes v, whose last field is a nil list, without its closing
	// "null}", so that the list can follow.
	open := func(v any) error {
		b, err := marshalRaw(v)
		if err != nil {
			return err
		}
		p, ok := bytes.CutSuffix(b, []byte("null}"))
		if !ok {
			return fmt.Errorf("encode snapshot: unexpected %s", b)
		}
		_, err = bw.Write(p)
		return err
	}
	head := *snap
	head.Tables = nil
	if err := open(head); err != nil {
		return err
	}
	bw.WriteString("[")
	for i, t := range snap.Tables {
		if i > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n")
		items := t.Items
		t.Items = nil
		if err := open(t); err != nil {
			return err
		}
		bw.WriteString("[")
		for j, item := range items {
			if j > 0 {
				bw.WriteString(",")
			}
			bw.WriteString("\n")
			bw.Write(item)
		}
		if len(items) > 0 {
			bw.WriteString("\n")
		}
		bw.WriteString("]}")
	}
	if len(snap.Tables) > 0 {
		bw.WriteString("\n")
	}
	bw.WriteString("]\n")
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(cs.sum().line())
	return err
}

// marshalRaw is json.Marshal without HTML escaping (the snapshot is meant
// to be readable) and without the trailing newline.
func marshalRaw(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeAtomic writes path through a temporary file in the same directory
// that is synced and then renamed over path, so that a crash or error at any
// point leaves either the old file or the new one, never a partial file.
// beforeRename, when set (tests), runs just before the rename; its error
// aborts the write.
func writeAtomic(path string, write func(io.Writer) error, beforeRename func(tmp string) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(path, ".gz") {
		zw = gzip.NewWriter(f)
		w = zw
	}
	if err := write(w); err != nil {
		return err
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if beforeRename != nil {
		if err := beforeRename(tmp); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	// Make the rename durable; not every platform can sync a directory.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// capture reads every table's definition, TTL setting and items while no
// request is being served (the exclusive lock), so no write is half in it;
// atLock, when set, runs under the same lock.
func (h *handler) capture(ctx context.Context, atLock func(*snapshotFile)) (*snapshotFile, error) {
	h.lock.Lock()
	defer h.lock.Unlock()
	h.mu.Lock()
	infos := map[string]tableInfo{}
	for name, info := range h.tables {
		c := *info
		c.throughput = maps.Clone(info.throughput)
		infos[name] = c
	}
	h.mu.Unlock()
	snap := &snapshotFile{Format: snapshotFormat, Version: snapshotVersion, SavedAt: time.Now().UTC(), Tables: []snapshotTable{}}
	if atLock != nil {
		atLock(snap)
	}
	for _, name := range slices.Sorted(maps.Keys(infos)) {
		t, err := h.captureTable(ctx, name, infos[name])
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", name, err)
		}
		if t != nil {
			snap.Tables = append(snap.Tables, *t)
		}
	}
	return snap, nil
}

// captureTable captures one table; nil if the backend no longer has it
// (removed behind the layer's back, e.g. Backend.Reset). Callers hold the
// exclusive lock.
func (h *handler) captureTable(ctx context.Context, name string, info tableInfo) (*snapshotTable, error) {
	rep := h.call(ctx, "DescribeTable", mustJSON(map[string]string{"TableName": name}))
	if rep.status != http.StatusOK {
		if bytes.Contains(rep.body, []byte("ResourceNotFoundException")) {
			return nil, nil
		}
		return nil, fmt.Errorf("describe: %d %s", rep.status, bytes.TrimSpace(rep.body))
	}
	var d struct{ Table tableDef }
	if err := json.Unmarshal(rep.body, &d); err != nil {
		return nil, fmt.Errorf("decode description: %w", err)
	}
	var items []json.RawMessage
	if ti := h.indexes[name]; ti != nil {
		items = make([]json.RawMessage, 0, ti.len())
		_ = ti.each(func(e *entry) error {
			items = append(items, e.data) // never changed in place (see entry)
			return nil
		})
	}
	def := d.Table
	def.TableName = name
	def.AttributeDefinitions = info.attrDefs
	def.BillingMode = info.billing
	tput := func(idx string) *capacity {
		if c, ok := info.throughput[idx]; ok {
			return &c
		}
		return nil
	}
	def.ProvisionedThroughput = tput("")
	for i := range def.GlobalSecondaryIndexes {
		def.GlobalSecondaryIndexes[i].ProvisionedThroughput = tput(def.GlobalSecondaryIndexes[i].IndexName)
	}
	for i := range def.LocalSecondaryIndexes {
		def.LocalSecondaryIndexes[i].ProvisionedThroughput = nil
	}
	byName := func(a, b indexSpec) int { return strings.Compare(a.IndexName, b.IndexName) }
	slices.SortFunc(def.GlobalSecondaryIndexes, byName) // minidyn lists them in map order
	slices.SortFunc(def.LocalSecondaryIndexes, byName)
	if len(def.AttributeDefinitions) == 0 {
		def.AttributeDefinitions = deriveAttrDefs(def, items)
	}
	t := &snapshotTable{Name: name, CreatedAt: info.created.UTC(), Definition: def, Items: items}
	if t.Items == nil {
		t.Items = []json.RawMessage{}
	}
	if info.ttlAttr != "" {
		t.TimeToLive = &ttlSpec{AttributeName: info.ttlAttr, Enabled: true}
	}
	return t, nil
}

// deriveAttrDefs builds attribute definitions for the key attributes of a
// table the layer did not see created, typing each from the items (S when
// no item has it).
func deriveAttrDefs(def tableDef, raw []json.RawMessage) json.RawMessage {
	items := make([]map[string]any, 0, len(raw))
	for _, r := range raw {
		var item map[string]any
		if json.Unmarshal(r, &item) == nil {
			items = append(items, item)
		}
	}
	type attrDef struct{ AttributeName, AttributeType string }
	var defs []attrDef
	add := func(ks []keyElem) {
		for _, k := range ks {
			if slices.ContainsFunc(defs, func(d attrDef) bool { return d.AttributeName == k.AttributeName }) {
				continue
			}
			typ := "S"
			for _, item := range items {
				if av, ok := item[k.AttributeName].(map[string]any); ok && len(av) == 1 {
					for t := range av {
						typ = t
					}
					break
				}
			}
			defs = append(defs, attrDef{k.AttributeName, typ})
		}
	}
	add(def.KeySchema)
	for _, ix := range slices.Concat(def.GlobalSecondaryIndexes, def.LocalSecondaryIndexes) {
		add(ix.KeySchema)
	}
	return mustJSON(defs)
}

// restore creates the snapshot's tables and puts their items, while no
// request is being served. It changes nothing if a table already exists.
func (h *handler) restore(ctx context.Context, snap *snapshotFile) error {
	h.lock.Lock()
	defer h.lock.Unlock()
	for _, t := range snap.Tables {
		if h.call(ctx, "DescribeTable", mustJSON(map[string]string{"TableName": t.Name})).status == http.StatusOK {
			return fmt.Errorf("table %s already exists", t.Name)
		}
	}
	for _, t := range snap.Tables {
		rep := h.call(ctx, "CreateTable", mustJSON(t.Definition))
		if rep.status != http.StatusOK {
			return fmt.Errorf("create table %s: %s", t.Name, bytes.TrimSpace(rep.body))
		}
		info := &tableInfo{created: t.CreatedAt, attrDefs: t.Definition.AttributeDefinitions,
			billing: t.Definition.BillingMode, throughput: map[string]capacity{}}
		if info.created.IsZero() {
			info.created = time.Now()
		}
		if c := t.Definition.ProvisionedThroughput; c != nil {
			info.throughput[""] = *c
		}
		for _, g := range t.Definition.GlobalSecondaryIndexes {
			if g.ProvisionedThroughput != nil {
				info.throughput[g.IndexName] = *g.ProvisionedThroughput
			}
		}
		if t.TimeToLive != nil && t.TimeToLive.Enabled {
			info.ttlAttr = t.TimeToLive.AttributeName
		}
		h.mu.Lock()
		h.tables[t.Name] = info
		h.mu.Unlock()
		delete(h.indexes, t.Name)
		ti, rep := h.tableLocked(ctx, t.Name)
		if rep != nil {
			return fmt.Errorf("table %s: %s", t.Name, bytes.TrimSpace(rep.body))
		}
		for i, raw := range t.Items {
			item, err := decodeStored(raw)
			if err != nil {
				return fmt.Errorf("table %s item %d: %w", t.Name, i, err)
			}
			if err := ti.checkItemKey(item); err != nil {
				return fmt.Errorf("table %s item %d: %w", t.Name, i, err)
			}
			if err := ti.put(item); err != nil {
				return fmt.Errorf("table %s item %d: %w", t.Name, i, err)
			}
		}
	}
	return nil
}
