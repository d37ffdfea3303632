// Package sse writes Server-Sent Events. Each event is one `data:` line
// holding a JSON object followed by a blank line; JSON encoding escapes
// newlines, so no content can break an event. A keep-alive comment is sent
// after a configurable stretch of silence.
package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Writer writes events to an HTTP response, flushing each one. It is safe
// for concurrent use (the keep-alive runs beside the producer).
type Writer struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	rc   *http.ResponseController
	last time.Time
	err  error
}

// NewWriter sets the event-stream headers on w and writes the 200 status.
func NewWriter(w http.ResponseWriter) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-store")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &Writer{w: w, rc: http.NewResponseController(w), last: time.Now()}
	_ = s.rc.Flush()
	return s
}

// Encode returns the wire form of one event carrying v as JSON.
func Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("data: ")
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends the line with '\n'
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// Send writes v as one event and flushes it. It returns the first write
// error, after which every call fails (the client is gone).
func (s *Writer) Send(v any) error {
	b, err := Encode(v)
	if err != nil {
		return err
	}
	return s.write(b)
}

// Comment writes a comment line (ignored by clients), e.g. ": ping". Line
// breaks in text become spaces, so a comment can never end an event.
func (s *Writer) Comment(text string) error {
	text = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(text)
	return s.write([]byte(": " + text + "\n\n"))
}

func (s *Writer) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return err
	}
	s.last = time.Now()
	return nil
}

// KeepAlive sends a ": ping" comment whenever nothing was written for
// interval, until ctx is done. Run it in its own goroutine.
func (s *Writer) KeepAlive(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			idle := time.Since(s.last) >= interval
			s.mu.Unlock()
			if idle && s.Comment("ping") != nil {
				return
			}
		}
	}
}
