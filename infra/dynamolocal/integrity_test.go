package dynamolocal_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/infra/dynamolocal"
)

// journalHeader is the header every journal file starts with.
const journalHeader = "dynamolocal-journal 1\n"

// snapshotItems is how many 4 KB items the snapshot of storeWithJournal
// holds: enough for several 64 KiB checksum blocks.
const snapshotItems = 40

// storeWithJournal leaves, in a new directory, a data file as a crash
// leaves it: a snapshot holding items s01..s40 (4 KB each, so that it
// spans several checksum blocks), and a journal of five answered puts
// after it, k1..k5. It returns the data file. The store is made once per
// name and copied.
func storeWithJournal(t *testing.T, name string) string {
	t.Helper()
	fixtures.Lock()
	f, ok := fixtures.m[name]
	if !ok {
		f = makeStore(t, name)
		fixtures.m[name] = f
	}
	fixtures.Unlock()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, f.snapshot, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file+".journal", f.journal, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

type storeFiles struct{ snapshot, journal []byte }

var fixtures = struct {
	sync.Mutex
	m map[string]storeFiles
}{m: map[string]storeFiles{}}

func makeStore(t *testing.T, name string) storeFiles {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	e, gdb, _ := startData(t, dynamolocal.Options{DataFile: file, Interval: time.Hour})
	ctx := ctxT(t)
	if err := gdb.CreateTable("kv", struct {
		K string `dynamo:"K,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= snapshotItems; i++ {
		if err := gdb.Table("kv").Put(map[string]string{"K": fmt.Sprintf("s%02d", i), "V": strings.Repeat("0123456789", 400)}).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Snapshot(file); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if err := gdb.Table("kv").Put(map[string]string{"K": fmt.Sprint("k", i), "V": strings.Repeat("v", 40)}).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dynamolocal.Crash(e)
	var f storeFiles
	var err error
	if f.snapshot, err = os.ReadFile(file); err == nil {
		f.journal, err = os.ReadFile(file + ".journal")
	}
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// wantKeys is the keys of storeWithJournal's snapshot, then k1..kN.
func wantKeys(n int) []string {
	var keys []string
	for i := 1; i <= n; i++ {
		keys = append(keys, fmt.Sprint("k", i))
	}
	for i := 1; i <= snapshotItems; i++ {
		keys = append(keys, fmt.Sprintf("s%02d", i))
	}
	return keys
}

// fileState is a file's bytes and modification time; nil bytes and a
// zero time for a missing file.
type fileState struct {
	data  []byte
	mtime time.Time
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return fileState{}
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{data: b, mtime: info.ModTime()}
}

// age sets the modification time of the files that exist an hour back,
// so that a rewrite with the same bytes shows too.
func age(t *testing.T, paths ...string) {
	t.Helper()
	stamp := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, p := range paths {
		if err := os.Chtimes(p, stamp, stamp); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

func flip(b []byte, i int) []byte {
	b[i] ^= 0x01
	return b
}

// blockAt returns the start of the 64 KiB checksum block holding offset i.
func blockAt(i int) int { return i / (64 << 10) * (64 << 10) }

// digitAfter returns the offset of the first decimal digit at or after
// from, inside an item's value.
func digitAfter(t *testing.T, b []byte, from int) int {
	t.Helper()
	i := bytes.Index(b[from:], []byte("0123456789"))
	if i < 0 {
		t.Fatalf("no digits after offset %d", from)
	}
	return from + i + 3
}

// TestDamageStopsTheStart is the damage matrix: every kind of damage a
// crash cannot leave in a data file or its journal stops StartWith with
// an error naming the damaged file and the byte offset of the damage,
// and every file is left as it was, byte for byte (and its modification
// time), with no file added.
func TestDamageStopsTheStart(t *testing.T) {
	t.Parallel()
	type damage struct {
		name string
		// damage changes the journal's or the snapshot's bytes (nil: the
		// file is removed) and returns the offset the error must name
		// (-1: none).
		journal  func(t *testing.T, j []byte) ([]byte, int)
		snapshot func(t *testing.T, s []byte) ([]byte, int)
		want     string
	}
	last := func(t *testing.T, j []byte) int {
		offs := recordOffsets(t, j)
		return offs[len(offs)-1]
	}
	cases := []damage{
		{name: "journal: flipped byte in the last record's payload", want: "fails its checksum",
			journal: func(t *testing.T, j []byte) ([]byte, int) { o := last(t, j); return flip(j, o+20+7), o }},
		{name: "journal: flipped last byte of the last record", want: "fails its checksum",
			journal: func(t *testing.T, j []byte) ([]byte, int) { return flip(j, len(j)-1), last(t, j) }},
		{name: "journal: flipped bit in the last record's length", want: "record header fails its checksum",
			journal: func(t *testing.T, j []byte) ([]byte, int) { o := last(t, j); return flip(j, o), o }},
		{name: "journal: huge length in the last record's header", want: "record header fails its checksum",
			journal: func(t *testing.T, j []byte) ([]byte, int) {
				o := last(t, j)
				binary.LittleEndian.PutUint32(j[o:], 1<<30)
				return j, o
			}},
		{name: "journal: flipped byte in the last record's sequence number", want: "record header fails its checksum",
			journal: func(t *testing.T, j []byte) ([]byte, int) { o := last(t, j); return flip(j, o+6), o }},
		{name: "journal: flipped byte in the last record's header checksum", want: "record header fails its checksum",
			journal: func(t *testing.T, j []byte) ([]byte, int) { o := last(t, j); return flip(j, o+13), o }},
		{name: "journal: flipped byte in the last record's payload checksum", want: "fails its checksum",
			journal: func(t *testing.T, j []byte) ([]byte, int) { o := last(t, j); return flip(j, o+17), o }},
		{name: "journal: the last record's payload zeroed", want: "fails its checksum",
			journal: func(t *testing.T, j []byte) ([]byte, int) {
				o := last(t, j)
				clear(j[o+20:])
				return j, o
			}},
		{name: "journal: flipped byte in a middle record's payload", want: "fails its checksum",
			journal: func(t *testing.T, j []byte) ([]byte, int) { o := recordOffsets(t, j)[2]; return flip(j, o+20+3), o }},
		{name: "journal: flipped byte in a middle record's header", want: "record header fails its checksum",
			journal: func(t *testing.T, j []byte) ([]byte, int) { o := recordOffsets(t, j)[1]; return flip(j, o+2), o }},
		{name: "journal: records swapped", want: "write number",
			journal: func(t *testing.T, j []byte) ([]byte, int) {
				offs := recordOffsets(t, j)
				a, b, c := offs[1], offs[2], offs[3]
				out := slices.Concat(j[:a], j[b:c], j[a:b], j[c:])
				return out, a // the third record, now second, is out of sequence
			}},
		{name: "journal: emptied (0 bytes)", want: "empty",
			journal: func(t *testing.T, j []byte) ([]byte, int) { return []byte{}, 0 }},
		{name: "journal: without its header", want: "not a dynamolocal journal",
			journal: func(t *testing.T, j []byte) ([]byte, int) { return j[len(journalHeader):], 0 }},
		{name: "journal: changed header", want: "not a dynamolocal journal",
			journal: func(t *testing.T, j []byte) ([]byte, int) {
				i := strings.IndexByte(journalHeader, '1')
				j[i] = '7'
				return j, i
			}},
		{name: "journal: cut inside its header", want: "ends inside the journal header",
			journal: func(t *testing.T, j []byte) ([]byte, int) { return j[:9], 9 }},
		{name: "journal: missing beside a snapshot saved with one", want: "is missing",
			journal: func(t *testing.T, j []byte) ([]byte, int) { return nil, -1 }},
		{name: "snapshot: changed digit in an item", want: "do not match their checksum",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) {
				i := digitAfter(t, s, 2*(64<<10)+100)
				s[i] = '0' + (s[i]-'0'+1)%10
				return s, blockAt(i)
			}},
		{name: "snapshot: changed byte in a table definition", want: "do not match their checksum",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) {
				i := bytes.Index(s, []byte(`"KeyType":"HASH"`))
				s[i+12] = 'Z'
				return s, blockAt(i)
			}},
		{name: "snapshot: changed version", want: "do not match their checksum",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) {
				i := bytes.Index(s, []byte(`"version":3`))
				s[i+10] = '2'
				return s, 0
			}},
		{name: "snapshot: changed journal sequence number", want: "do not match their checksum",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) {
				i := bytes.Index(s, []byte(`"journalLSN":`)) + len(`"journalLSN":`)
				s[i] = '0' + (s[i]-'0'+1)%10
				return s, 0
			}},
		{name: "snapshot: changed block checksum", want: "do not match their checksum",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) {
				i := bytes.Index(s, []byte(`"blocks":["`)) + len(`"blocks":["`) + 11 // the second block's first digit
				if s[i] == '0' {
					s[i] = '1'
				} else {
					s[i] = '0'
				}
				return s, 64 << 10
			}},
		{name: "snapshot: changed checksum trailer", want: "checksum trailer is damaged",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) {
				i := bytes.LastIndex(s, []byte(`"algorithm"`))
				s[i+3] = 'X'
				return s, bytes.LastIndexByte(s[:len(s)-1], '\n') + 1
			}},
		{name: "snapshot: changed trailer name", want: "not the checksum trailer",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) {
				i := bytes.LastIndex(s, []byte(`"checksum"`))
				s[i+2] = 'C'
				return s, bytes.LastIndexByte(s[:len(s)-1], '\n') + 1
			}},
		{name: "snapshot: last newline changed", want: "not the checksum trailer",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) {
				i := bytes.LastIndexByte(s[:len(s)-1], '\n')
				s[i] = ' '
				return s, bytes.LastIndexByte(s[:i], '\n') + 1
			}},
		{name: "snapshot: cut in half", want: "cut short",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) { return s[:len(s)/2], len(s) / 2 }},
		{name: "snapshot: cut before its trailer", want: "cut short",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) {
				i := bytes.LastIndexByte(s[:len(s)-1], '\n') + 1
				return s[:i], i
			}},
		{name: "snapshot: a byte removed", want: "checksum covers",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) {
				i := digitAfter(t, s, 100<<10)
				return slices.Delete(s, i, i+1), blockAt(i)
			}},
		{name: "snapshot: emptied (0 bytes)", want: "empty file",
			snapshot: func(t *testing.T, s []byte) ([]byte, int) { return []byte{}, 0 }},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := storeWithJournal(t, "data.json")
			jpath := file + ".journal"
			damaged, offset := jpath, 0
			if tt.journal != nil {
				b, err := os.ReadFile(jpath)
				if err != nil {
					t.Fatal(err)
				}
				var out []byte
				if out, offset = tt.journal(t, b); out == nil {
					err = os.Remove(jpath)
				} else {
					err = os.WriteFile(jpath, out, 0o600)
				}
				if err != nil {
					t.Fatal(err)
				}
			} else {
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				var out []byte
				out, offset = tt.snapshot(t, b)
				if err := os.WriteFile(file, out, 0o600); err != nil {
					t.Fatal(err)
				}
				damaged = file
			}
			age(t, file, jpath)
			before := []fileState{stateOf(t, file), stateOf(t, jpath)}
			entries, _ := os.ReadDir(filepath.Dir(file))

			e, err := dynamolocal.StartWith(dynamolocal.Options{DataFile: file, Interval: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				e.Close()
				t.Fatal("StartWith succeeded on a damaged store")
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, damaged) || !strings.Contains(msg, tt.want) || !strings.Contains(msg, "left untouched") {
				t.Errorf("error %q\nwant the damaged file %s, %q and that the files are left untouched", msg, damaged, tt.want)
			}
			if at := fmt.Sprintf("at offset %d:", offset); offset >= 0 && !strings.Contains(msg, at) {
				t.Errorf("error %q\ndoes not name the offset: want %q", msg, at)
			}
			time.Sleep(5 * time.Millisecond) // a stray saver would have run
			after := []fileState{stateOf(t, file), stateOf(t, jpath)}
			for i, name := range []string{file, jpath} {
				if !bytes.Equal(after[i].data, before[i].data) || !after[i].mtime.Equal(before[i].mtime) {
					t.Errorf("%s was modified", name)
				}
			}
			if again, _ := os.ReadDir(filepath.Dir(file)); len(again) != len(entries) {
				t.Errorf("the directory holds %d entries, %d before", len(again), len(entries))
			}
		})
	}
}

// TestTornTailIsDropped: a record cut short at the end of the journal,
// the one thing a crash while appending leaves (the file ends before the
// record's declared header and payload are complete), was never
// answered: the start drops it, and only it, truncates the journal after
// the last whole record, and goes on; later writes survive the next
// crash. Cut anywhere in the last record, its header included, or inside
// the record before it (a group commit's append of two, both
// unanswered).
func TestTornTailIsDropped(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cut  func(lastRecord, recordLen int) int // bytes of the last record kept
		kept int                                 // writes k1..kN that remain
	}{
		{"1 byte of the header", func(_, _ int) int { return 1 }, 4},
		{"half the header", func(_, _ int) int { return 10 }, 4},
		{"all but one byte of the header", func(_, _ int) int { return 19 }, 4},
		{"the whole header, no payload", func(_, _ int) int { return 20 }, 4},
		{"the header and 1 payload byte", func(_, _ int) int { return 21 }, 4},
		{"all but the last byte", func(_, n int) int { return n - 1 }, 4},
		{"inside the record before the last", func(_, _ int) int { return -30 }, 3},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := storeWithJournal(t, "data.json")
			jpath := file + ".journal"
			whole, err := os.ReadFile(jpath)
			if err != nil {
				t.Fatal(err)
			}
			offs := recordOffsets(t, whole)
			lastOff := offs[len(offs)-1]
			cut := lastOff + tt.cut(lastOff, len(whole)-lastOff)
			wantLen := lastOff
			if cut < lastOff {
				wantLen = offs[len(offs)-2]
			}
			if err := os.WriteFile(jpath, whole[:cut], 0o600); err != nil {
				t.Fatal(err)
			}
			e, gdb, _ := startData(t, dynamolocal.Options{DataFile: file, Interval: time.Hour})
			if got := keysIn(t, gdb); !slices.Equal(got, wantKeys(tt.kept)) {
				t.Fatalf("after a torn tail: %v\nwant %v", got, wantKeys(tt.kept))
			}
			if b, _ := os.ReadFile(jpath); !bytes.Equal(b, whole[:wantLen]) {
				t.Errorf("the journal holds %d bytes, want the %d before the torn record", len(b), wantLen)
			}
			if err := gdb.Table("kv").Put(map[string]string{"K": "k9"}).Run(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			dynamolocal.Crash(e)
			_, gdb2, _ := startData(t, dynamolocal.Options{DataFile: file, Interval: time.Hour})
			if got, want := keysIn(t, gdb2), append(wantKeys(tt.kept), "k9"); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Fatalf("after the next crash: %v", got)
			}
		})
	}
}

// TestCompactedJournalKeepsItsHeader: a new store's journal holds its
// header from the start; a snapshot compacts it to that header, Close
// too; the snapshot says it has a journal and ends with its checksum;
// restarts find every write.
func TestCompactedJournalKeepsItsHeader(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data.json")
	jpath := file + ".journal"
	o := dynamolocal.Options{DataFile: file, Interval: time.Hour}
	header := func(when string) {
		t.Helper()
		if b, err := os.ReadFile(jpath); err != nil || string(b) != journalHeader {
			t.Errorf("%s: journal %q (%v), want its header alone", when, b, err)
		}
	}
	e, gdb, _ := startData(t, o)
	header("at the first start")
	ctx := ctxT(t)
	if err := gdb.CreateTable("kv", struct {
		K string `dynamo:"K,hash"`
	}{}).OnDemand(true).Run(ctx); err != nil {
		t.Fatal(err)
	}
	put := func(gdb *dynamo.DB, k string) {
		t.Helper()
		if err := gdb.Table("kv").Put(map[string]string{"K": k}).Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	put(gdb, "a")
	if err := e.Snapshot(file); err != nil {
		t.Fatal(err)
	}
	header("after a snapshot")
	s, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(s, []byte("\n")), []byte("\n"))
	if !bytes.Contains(lines[0], []byte(`"version":3,`)) || !bytes.Contains(lines[0], []byte(`"journal":true,`)) ||
		!bytes.HasPrefix(lines[len(lines)-1], []byte(`,"checksum":{"algorithm":"crc32c","size":`)) {
		t.Errorf("snapshot:\n%s", s)
	}
	put(gdb, "b")
	closeEngine(t, e)
	header("after Close")

	e, gdb, _ = startData(t, o)
	if got := keysIn(t, gdb); !slices.Equal(got, []string{"a", "b"}) || e.Restored == nil || e.Restored.Replayed != 0 {
		t.Fatalf("after a restart: %v, %+v", got, e.Restored)
	}
	put(gdb, "c")
	dynamolocal.Crash(e)
	_, gdb, _ = startData(t, o)
	if got := keysIn(t, gdb); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("after a crash: %v", got)
	}
}

// TestEarlierFormatIsRewrittenAtStart: the files an earlier build leaves
// (a version 2 snapshot, without checksum, with or without its journal)
// start, with every write, and the data file is rewritten at once in the
// checksummed format, its journal compacted to its header.
func TestEarlierFormatIsRewrittenAtStart(t *testing.T) {
	t.Parallel()
	for _, withJournal := range []bool{true, false} {
		t.Run(fmt.Sprint("journal ", withJournal), func(t *testing.T) {
			t.Parallel()
			file := storeWithJournal(t, "data.json")
			jpath := file + ".journal"
			s, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			// As the previous build wrote it: no trailer, no journal flag.
			trailer := bytes.LastIndexByte(s[:len(s)-1], '\n') + 1
			v2 := append(bytes.TrimSuffix(s[:trailer], []byte("]\n")), "]}\n"...)
			v2 = bytes.Replace(v2, []byte(`"version":3,`), []byte(`"version":2,`), 1)
			v2 = bytes.Replace(v2, []byte(`"journal":true,`), nil, 1)
			if err := os.WriteFile(file, v2, 0o600); err != nil {
				t.Fatal(err)
			}
			kept := 5
			if !withJournal {
				// The previous build removed the journal at Close.
				os.Remove(jpath)
				kept = 0
			}
			e, gdb, _ := startData(t, dynamolocal.Options{DataFile: file, Interval: time.Hour})
			if got := keysIn(t, gdb); !slices.Equal(got, wantKeys(kept)) {
				t.Fatalf("from the earlier format: %v", got)
			}
			now, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(now, []byte(`"version":3,`)) || !bytes.Contains(now, []byte(`"journal":true,`)) || !bytes.Contains(now, []byte(`,"checksum":{`)) {
				t.Errorf("the data file was not rewritten in the current format")
			}
			if b, _ := os.ReadFile(jpath); string(b) != journalHeader {
				t.Errorf("journal %q after the rewrite, want its header", b)
			}
			dynamolocal.Crash(e)
			_, gdb, _ = startData(t, dynamolocal.Options{DataFile: file, Interval: time.Hour})
			if got := keysIn(t, gdb); !slices.Equal(got, wantKeys(kept)) {
				t.Fatalf("after the rewrite and a crash: %v", got)
			}
		})
	}
}

// TestGzipDataFileDamage: a .gz data file is checked by gzip's CRC and by
// the snapshot's own checksum of the uncompressed content; damage to
// either stops the start naming the file and an offset, untouched.
func TestGzipDataFileDamage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, want string
		damage     func(t *testing.T, gz []byte) []byte
	}{
		{"flipped compressed byte", "gzip", func(t *testing.T, gz []byte) []byte { return flip(gz, len(gz)/2) }},
		{"cut short", "gzip", func(t *testing.T, gz []byte) []byte { return gz[:len(gz)-100] }},
		{"changed digit, recompressed", "(offset in the uncompressed content)", func(t *testing.T, gz []byte) []byte {
			zr, err := gzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				t.Fatal(err)
			}
			s, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			i := digitAfter(t, s, 70<<10)
			s[i] = '0' + (s[i]-'0'+1)%10
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(s)
			zw.Close()
			return buf.Bytes()
		}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := storeWithJournal(t, "data.json.gz")
			b, err := os.ReadFile(file)
			if err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
				t.Fatalf("not gzip: %v", err)
			}
			if err := os.WriteFile(file, tt.damage(t, b), 0o600); err != nil {
				t.Fatal(err)
			}
			age(t, file)
			before := stateOf(t, file)
			_, err = dynamolocal.StartWith(dynamolocal.Options{DataFile: file, Logger: slog.New(slog.DiscardHandler)})
			if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "at offset ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("StartWith = %v, want the file, an offset and %q", err, tt.want)
			}
			if after := stateOf(t, file); !bytes.Equal(after.data, before.data) || !after.mtime.Equal(before.mtime) {
				t.Error("the data file was modified")
			}
		})
	}
}
