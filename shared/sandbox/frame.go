package sandbox

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// The wire between a pool and a worker: length-prefixed frames on the
// worker's stdin and stdout.
//
//	request:  u32 length | u64 timeout (ns; 0: none) | payload
//	response: u32 length | u8 status | u64 CPU time (ns) | u64 peak RSS (bytes) | payload
//
// The length counts the bytes after itself. A worker's first frame is a
// response with status statusHello and its hello as JSON payload.

const (
	requestHeader  = 8
	responseHeader = 1 + 8 + 8
)

// Response statuses.
const (
	statusOK       = 0 // payload is the handler's response
	statusTooLarge = 1 // the handler's response exceeded MaxResponse; no payload
	statusHello    = 2 // the worker's first frame
)

// maxHelloBytes bounds the hello frame a pool reads.
const maxHelloBytes = 4096

// response is a decoded response frame.
type response struct {
	status  byte
	cpu     time.Duration
	peakRSS int64
	payload []byte
}

func writeRequest(w io.Writer, timeout time.Duration, payload []byte) error {
	buf := make([]byte, 4+requestHeader+len(payload))
	binary.BigEndian.PutUint32(buf, uint32(requestHeader+len(payload)))
	binary.BigEndian.PutUint64(buf[4:], uint64(max(timeout, 0)))
	copy(buf[4+requestHeader:], payload)
	_, err := w.Write(buf)
	return err
}

// readRequest reads one request; io.EOF means the pool closed the pipe.
func readRequest(r io.Reader) (time.Duration, []byte, error) {
	var hdr [4 + requestHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < requestHeader {
		return 0, nil, fmt.Errorf("sandbox: request frame of %d bytes", n)
	}
	payload := make([]byte, n-requestHeader)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return time.Duration(binary.BigEndian.Uint64(hdr[4:])), payload, nil
}

func writeResponse(w io.Writer, res response) error {
	buf := make([]byte, 4+responseHeader+len(res.payload))
	binary.BigEndian.PutUint32(buf, uint32(responseHeader+len(res.payload)))
	buf[4] = res.status
	binary.BigEndian.PutUint64(buf[5:], uint64(max(res.cpu, 0)))
	binary.BigEndian.PutUint64(buf[13:], uint64(max(res.peakRSS, 0)))
	copy(buf[4+responseHeader:], res.payload)
	_, err := w.Write(buf)
	return err
}

// errFrameTooLarge is returned by readResponse for a frame over its limit.
type errFrameTooLarge struct{ size, limit int }

func (e errFrameTooLarge) Error() string {
	return fmt.Sprintf("sandbox: a %d-byte response exceeds %d bytes", e.size, e.limit)
}

// readResponse reads one response whose payload is at most maxPayload
// bytes; a larger one is errFrameTooLarge and is left unread.
func readResponse(r io.Reader, maxPayload int) (response, error) {
	var hdr [4 + responseHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return response{}, err
	}
	n := int64(binary.BigEndian.Uint32(hdr[:]))
	if n < responseHeader {
		return response{}, fmt.Errorf("sandbox: response frame of %d bytes", n)
	}
	if n-responseHeader > int64(maxPayload) {
		return response{}, errFrameTooLarge{int(n - responseHeader), maxPayload}
	}
	res := response{
		status:  hdr[4],
		cpu:     time.Duration(binary.BigEndian.Uint64(hdr[5:])),
		peakRSS: int64(binary.BigEndian.Uint64(hdr[13:])),
		payload: make([]byte, n-responseHeader),
	}
	if _, err := io.ReadFull(r, res.payload); err != nil {
		return response{}, err
	}
	return res, nil
}
