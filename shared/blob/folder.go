package blob

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// Folder is a Backend in a directory on disk: the dev server's store
// beside DATA_FILE, kept across restarts.
//
// Layout: the blob at key "a/b/c" is the file <dir>/a/b/c~. Keys are made
// of safe segments (CheckKey), so a key never leaves the directory, and
// the "~" that ends every blob file (and no key segment) keeps the file of
// key "a/b" apart from the directory of key "a/b/c". A file holds the
// bytes, then a trailer: the JSON metadata (content type, size, ETag), its
// length (4 bytes, big-endian) and the magic "WCBLOB1\n". Writes go to a
// temporary file (".put-*", which no key can name) in the same directory,
// are synced, and replace the blob by a rename, so a reader sees the old
// blob or the new one, never a mix, and a crash leaves at most a stray
// temporary file.
type Folder struct {
	dir string
	now func() time.Time
}

// NewFolder returns the Folder in dir, creating dir (mode 0700) when it
// does not exist. It fails when dir cannot be created or is not a
// directory.
func NewFolder(dir string, now func() time.Time) (*Folder, error) {
	if now == nil {
		now = time.Now
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob: folder %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("blob: folder %s: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("blob: folder %s is not a directory", dir)
	}
	return &Folder{dir: abs, now: now}, nil
}

// Dir returns the folder's absolute path.
func (f *Folder) Dir() string { return f.dir }

const (
	blobSuffix  = "~"
	tempPattern = ".put-*"
	magic       = "WCBLOB1\n"
	trailerLen  = 4 + len(magic)
	// maxMetaLen bounds the JSON metadata a trailer may claim.
	maxMetaLen = 64 << 10
)

// meta is a blob file's metadata.
type meta struct {
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	ETag        string `json:"etag"`
}

// path returns the file of key (a valid key).
func (f *Folder) path(key string) string {
	return filepath.Join(f.dir, filepath.FromSlash(key)) + blobSuffix
}

// Put implements Store.Put.
func (f *Folder) Put(ctx context.Context, key string, body io.Reader, o PutOptions) (Info, error) {
	const op = "blob.Folder.Put"
	if err := CheckKey(key); err != nil {
		return Info{}, errs.Wrap(op, err)
	}
	if err := CheckSize(op, o.Size); err != nil {
		return Info{}, err
	}
	info, err := f.write(key, body, o.Size, ContentTypeOr(o.ContentType), o.CreateOnly)
	if err != nil {
		return Info{}, errs.Wrap(op, err)
	}
	return info, ctx.Err()
}

// write stores size bytes of body under key atomically (see Folder); with
// createOnly, only when no blob is there: the temporary file is linked to
// the blob's name, which fails when the name exists.
func (f *Folder) write(key string, body io.Reader, size int64, contentType string, createOnly bool) (Info, error) {
	path := f.path(key)
	dir := filepath.Dir(path)
	var tmp *os.File
	var err error
	// A concurrent Delete may remove the (empty) directory between
	// MkdirAll and CreateTemp: try again.
	for range 3 {
		if err = os.MkdirAll(dir, 0o700); err != nil {
			return Info{}, fsError(err)
		}
		if tmp, err = os.CreateTemp(dir, tempPattern); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return Info{}, fsError(err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := md5.New()
	if _, err := CopyExactly(io.MultiWriter(tmp, h), body, size); err != nil {
		return Info{}, err
	}
	m := meta{ContentType: contentType, Size: size, ETag: `"` + hex.EncodeToString(h.Sum(nil)) + `"`}
	mj, err := json.Marshal(m)
	if err != nil {
		return Info{}, err
	}
	trailer := make([]byte, 0, len(mj)+trailerLen)
	trailer = append(trailer, mj...)
	trailer = binary.BigEndian.AppendUint32(trailer, uint32(len(mj)))
	trailer = append(trailer, magic...)
	if _, err := tmp.Write(trailer); err != nil {
		return Info{}, fsError(err)
	}
	if err := tmp.Sync(); err != nil {
		return Info{}, fsError(err)
	}
	if err := tmp.Close(); err != nil {
		return Info{}, fsError(err)
	}
	if createOnly {
		err := os.Link(tmp.Name(), path)
		if errors.Is(err, fs.ErrExist) {
			return Info{}, Exists("blob.Folder.write", key)
		}
		if err != nil {
			return Info{}, fsError(err)
		}
		os.Remove(tmp.Name())
	} else if err := os.Rename(tmp.Name(), path); err != nil {
		return Info{}, fsError(err)
	}
	done = true
	syncDir(dir)
	fi, err := os.Stat(path)
	modTime := f.now()
	if err == nil {
		modTime = fi.ModTime()
	}
	return Info{Key: key, Size: size, ContentType: contentType, ETag: m.ETag, LastModified: modTime.UTC()}, nil
}

// syncDir makes a rename in dir durable (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// open opens the blob file of key and reads its trailer.
func (f *Folder) open(op, key string) (*os.File, Info, error) {
	if err := CheckKey(key); err != nil {
		return nil, Info{}, errs.Wrap(op, err)
	}
	file, err := os.Open(f.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Info{}, NotFound(op, key)
	}
	if err != nil {
		return nil, Info{}, errs.Wrap(op, fsError(err))
	}
	info, err := readTrailer(file, key)
	if err != nil {
		file.Close()
		return nil, Info{}, errs.Wrap(op, err)
	}
	return file, info, nil
}

// readTrailer reads the metadata at the end of a blob file.
func readTrailer(file *os.File, key string) (Info, error) {
	fi, err := file.Stat()
	if err != nil {
		return Info{}, fsError(err)
	}
	corrupt := func(why string) error {
		return errs.E("blob.Folder", errs.Internal, "", "internal error").WithCause(fmt.Errorf("blob file %s: %s", file.Name(), why))
	}
	total := fi.Size()
	if total < int64(trailerLen) {
		return Info{}, corrupt("shorter than its trailer")
	}
	tail := make([]byte, trailerLen)
	if _, err := file.ReadAt(tail, total-int64(trailerLen)); err != nil {
		return Info{}, fsError(err)
	}
	if string(tail[4:]) != magic {
		return Info{}, corrupt("no trailer")
	}
	n := int64(binary.BigEndian.Uint32(tail[:4]))
	if n > maxMetaLen || n > total-int64(trailerLen) {
		return Info{}, corrupt("trailer length out of range")
	}
	mj := make([]byte, n)
	if _, err := file.ReadAt(mj, total-int64(trailerLen)-n); err != nil {
		return Info{}, fsError(err)
	}
	var m meta
	if err := json.Unmarshal(mj, &m); err != nil {
		return Info{}, corrupt("metadata does not decode")
	}
	if m.Size != total-int64(trailerLen)-n {
		return Info{}, corrupt("size does not match the file")
	}
	return Info{Key: key, Size: m.Size, ContentType: m.ContentType, ETag: m.ETag, LastModified: fi.ModTime().UTC()}, nil
}

// Get implements Store.Get.
func (f *Folder) Get(ctx context.Context, key string) (*Object, error) {
	file, info, err := f.open("blob.Folder.Get", key)
	if err != nil {
		return nil, err
	}
	return &Object{Info: info, Body: struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(file, 0, info.Size), file}}, nil
}

// Stat implements Store.Stat.
func (f *Folder) Stat(ctx context.Context, key string) (Info, error) {
	file, info, err := f.open("blob.Folder.Stat", key)
	if err != nil {
		return Info{}, err
	}
	file.Close()
	return info, nil
}

// Copy implements Store.Copy. The source is read from the file as it was
// opened: a concurrent Put to src replaces the file, not its content.
func (f *Folder) Copy(ctx context.Context, src, dst string, o CopyOptions) (Info, error) {
	const op = "blob.Folder.Copy"
	if err := CheckKey(dst); err != nil {
		return Info{}, errs.Wrap(op, err)
	}
	file, info, err := f.open(op, src)
	if err != nil {
		return Info{}, err
	}
	defer file.Close()
	if o.IfMatch != "" && info.ETag != o.IfMatch {
		return Info{}, Changed(op, src)
	}
	out, err := f.write(dst, io.NewSectionReader(file, 0, info.Size), info.Size, info.ContentType, false)
	return out, errs.Wrap(op, err)
}

// Delete implements Store.Delete, removing directories it leaves empty.
func (f *Folder) Delete(ctx context.Context, keys ...string) error {
	const op = "blob.Folder.Delete"
	for _, k := range keys {
		if err := CheckKey(k); err != nil {
			return errs.Wrap(op, err)
		}
	}
	for _, k := range keys {
		if err := f.remove(f.path(k)); err != nil {
			return errs.Wrap(op, err)
		}
	}
	return nil
}

// remove deletes the blob file path and then its parent directories up to
// f.dir while they are empty.
func (f *Folder) remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError(err)
	}
	for dir := filepath.Dir(path); dir != f.dir && strings.HasPrefix(dir, f.dir+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break // not empty, or gone
		}
	}
	return nil
}

// DeletePrefix implements Store.DeletePrefix: it walks the directory the
// prefix names (or the one holding its last, partial segment).
func (f *Folder) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	const op = "blob.Folder.DeletePrefix"
	if err := CheckPrefix(prefix); err != nil {
		return 0, errs.Wrap(op, err)
	}
	walkDir := f.dir
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		walkDir = filepath.Join(f.dir, filepath.FromSlash(prefix[:i]))
	}
	var doomed []string
	err := filepath.WalkDir(walkDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), blobSuffix) {
			return nil
		}
		rel, err := filepath.Rel(f.dir, path)
		if err != nil {
			return err
		}
		if key := filepath.ToSlash(strings.TrimSuffix(rel, blobSuffix)); strings.HasPrefix(key, prefix) {
			doomed = append(doomed, path)
		}
		return ctx.Err()
	})
	if err != nil {
		return 0, errs.Wrap(op, fsError(err))
	}
	for _, p := range doomed {
		if err := f.remove(p); err != nil {
			return 0, errs.Wrap(op, err)
		}
	}
	return len(doomed), nil
}

// fsError wraps a file system failure as Internal (its cause logged).
func fsError(err error) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &errs.Error{Op: "blob.Folder", Kind: errs.Internal, Err: err}
}

var _ Backend = (*Folder)(nil)
var _ Backend = (*Memory)(nil)
