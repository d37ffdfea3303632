package blob

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/workflowchat/service/shared/errs"
)

// Memory is a Backend in memory, for the dev server without DATA_FILE and
// for tests. Safe for concurrent use; its contents go with the process.
type Memory struct {
	mu   sync.RWMutex
	objs map[string]memObject
	now  func() time.Time
}

type memObject struct {
	data []byte
	info Info
}

// NewMemory returns an empty Memory whose blobs are stamped with now (nil:
// time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{objs: map[string]memObject{}, now: now}
}

// Put implements Store.Put.
func (m *Memory) Put(ctx context.Context, key string, body io.Reader, o PutOptions) (Info, error) {
	const op = "blob.Memory.Put"
	if err := CheckKey(key); err != nil {
		return Info{}, errs.Wrap(op, err)
	}
	if err := CheckSize(op, o.Size); err != nil {
		return Info{}, err
	}
	var buf bytes.Buffer
	if _, err := CopyExactly(&buf, body, o.Size); err != nil {
		return Info{}, errs.Wrap(op, err)
	}
	data := buf.Bytes()
	info := Info{Key: key, Size: int64(len(data)), ContentType: ContentTypeOr(o.ContentType), ETag: etagOf(data), LastModified: m.now().UTC()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, exists := m.objs[key]; exists && o.CreateOnly {
		return Info{}, Exists(op, key)
	}
	m.objs[key] = memObject{data: data, info: info}
	return info, ctx.Err()
}

// Get implements Store.Get.
func (m *Memory) Get(ctx context.Context, key string) (*Object, error) {
	const op = "blob.Memory.Get"
	o, err := m.lookup(op, key)
	if err != nil {
		return nil, err
	}
	return &Object{Info: o.info, Body: io.NopCloser(bytes.NewReader(o.data))}, nil
}

// Stat implements Store.Stat.
func (m *Memory) Stat(ctx context.Context, key string) (Info, error) {
	o, err := m.lookup("blob.Memory.Stat", key)
	return o.info, err
}

func (m *Memory) lookup(op, key string) (memObject, error) {
	if err := CheckKey(key); err != nil {
		return memObject{}, errs.Wrap(op, err)
	}
	m.mu.RLock()
	o, ok := m.objs[key]
	m.mu.RUnlock()
	if !ok {
		return memObject{}, errs.Wrap(op, NotFound(op, key))
	}
	return o, nil
}

// Copy implements Store.Copy.
func (m *Memory) Copy(ctx context.Context, src, dst string, o CopyOptions) (Info, error) {
	const op = "blob.Memory.Copy"
	if err := CheckKey(dst); err != nil {
		return Info{}, errs.Wrap(op, err)
	}
	if err := CheckKey(src); err != nil {
		return Info{}, errs.Wrap(op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.objs[src]
	switch {
	case !ok:
		return Info{}, NotFound(op, src)
	case o.IfMatch != "" && s.info.ETag != o.IfMatch:
		return Info{}, Changed(op, src)
	}
	info := s.info
	info.Key, info.LastModified = dst, m.now().UTC()
	m.objs[dst] = memObject{data: s.data, info: info} // blobs are never modified in place
	return info, nil
}

// Delete implements Store.Delete.
func (m *Memory) Delete(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if err := CheckKey(k); err != nil {
			return errs.Wrap("blob.Memory.Delete", err)
		}
	}
	m.mu.Lock()
	for _, k := range keys {
		delete(m.objs, k)
	}
	m.mu.Unlock()
	return nil
}

// DeletePrefix implements Store.DeletePrefix.
func (m *Memory) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	if err := CheckPrefix(prefix); err != nil {
		return 0, errs.Wrap("blob.Memory.DeletePrefix", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) {
			delete(m.objs, k)
			n++
		}
	}
	return n, nil
}

// Keys returns every key in m, sorted: for tests.
func (m *Memory) Keys() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	keys := make([]string, 0, len(m.objs))
	for k := range m.objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// etagOf returns the ETag of data as S3 computes it for a single-part
// upload: the quoted hex MD5 of the bytes (an identity, not a security
// check).
func etagOf(data []byte) string {
	sum := md5.Sum(data)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// CopyExactly copies size bytes from src to dst, failing with Invalid
// BLOB_SIZE_MISMATCH (SizeMismatch) when src ends early, holds more, or
// passes an http.MaxBytesReader's limit, and with Invalid BODY_INCOMPLETE
// when src fails otherwise (an *errs.Error from src is returned as is).
// Every backend's Put checks its body with it.
func CopyExactly(dst io.Writer, src io.Reader, size int64) (int64, error) {
	const op = "blob.CopyExactly"
	n, err := io.Copy(dst, io.LimitReader(src, size))
	if err != nil {
		return n, bodyError(op, err, size)
	}
	if n != size {
		return n, SizeMismatch(op, size)
	}
	var one [1]byte
	switch k, err := src.Read(one[:]); {
	case k > 0:
		return n, SizeMismatch(op, size)
	case err != nil && !errors.Is(err, io.EOF):
		return n, bodyError(op, err, size)
	case err == nil:
		// A reader may return (0, nil); read once more to be sure.
		if k, err := io.ReadFull(src, one[:]); k > 0 {
			return n, SizeMismatch(op, size)
		} else if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return n, bodyError(op, err, size)
		}
	}
	return n, nil
}

// bodyError classifies a failure reading a body being stored: a body
// larger than a limit the caller put on it (http.MaxBytesReader) is a
// size mismatch; anything else is Invalid: the sender's body broke off.
func bodyError(op string, err error, size int64) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return SizeMismatch(op, size)
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	return errs.E(op, errs.Invalid, "BODY_INCOMPLETE", "the body could not be read to its end").WithCause(err)
}
