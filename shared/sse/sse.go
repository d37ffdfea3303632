// Package sse writes Server-Sent Events. Each event is one `data:` line
// holding a JSON object followed by a blank line; JSON encoding escapes
// newlines, so no content can break an event. A keep-alive comment is sent
// after a configurable stretch of silence.
package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// EncodeWithID returns the wire form of one event with the SSE id id
// (which a client sends back as Last-Event-ID when it reconnects) carrying
// v as JSON. An id holding a line break or NUL is refused.
func EncodeWithID(id string, v any) ([]byte, error) {
	if strings.ContainsAny(id, "\r\n\x00") {
		return nil, fmt.Errorf("sse: invalid event id %q", id)
	}
	b, err := Encode(v)
	if err != nil || id == "" {
		return b, err
	}
	return append([]byte("id: "+id+"\n"), b...), nil
}

// Send writes v as one event and flushes it. It returns the first write
// error, after which every call fails (the client is gone).
func (s *Writer) Send(v any) error {
	return s.SendWithID("", v)
}

// SendWithID writes v as one event with SSE id id (none when empty), as
// Send does.
func (s *Writer) SendWithID(id string, v any) error {
	b, err := EncodeWithID(id, v)
	if err != nil {
		return err
	}
	return s.write(b)
}

// Queue sends events through a Writer from its own goroutine, so that the
// producer never waits for a slow or vanished client. Events queue in
// memory (the producer bounds how many there are); after the first failed
// write the rest are dropped.
type Queue struct {
	w    *Writer
	mu   sync.Mutex
	q    []queued
	shut bool
	wake chan struct{}
	done chan struct{}
}

type queued struct {
	id string
	v  any
}

// NewQueue starts a Queue over w. Close it.
func NewQueue(w *Writer) *Queue {
	q := &Queue{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.loop()
	return q
}

// Send queues v with SSE id id. It never blocks on the client.
func (q *Queue) Send(id string, v any) {
	q.mu.Lock()
	q.q = append(q.q, queued{id, v})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Close waits until every queued event was written or a write failed. It
// returns the write error, if any.
func (q *Queue) Close() error {
	q.mu.Lock()
	q.shut = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
	q.w.mu.Lock()
	defer q.w.mu.Unlock()
	return q.w.err
}

func (q *Queue) loop() {
	defer close(q.done)
	var failed bool
	for range q.wake {
		q.mu.Lock()
		batch, shut := q.q, q.shut
		q.q = nil
		q.mu.Unlock()
		for _, e := range batch {
			if !failed && q.w.SendWithID(e.id, e.v) != nil {
				failed = true
			}
		}
		if shut {
			q.mu.Lock()
			empty := len(q.q) == 0
			q.mu.Unlock()
			if empty {
				return
			}
		}
	}
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
