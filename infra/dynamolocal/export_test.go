package dynamolocal

// RewriteKeyConditions exposes rewriteKeyConditions to the external tests.
var RewriteKeyConditions = rewriteKeyConditions

// BackendItemsRead is how many stored items the layer has read to answer
// Query and Scan requests (from its own store; the name is older).
func BackendItemsRead(e *Engine) int64 { return e.h.itemsRead.Load() }

// Crash stops e as a killed process would: no final snapshot, journal
// records not yet written to the file are lost, the lock is released.
func Crash(e *Engine) { e.crash() }

// StallJournal holds e's next journal flush before it writes: the writes
// appended meanwhile are applied but not on disk. stalled is closed once
// the flush waits; release(nil) lets it write, release(err) fails it as a
// crash before the write would (its records are never written).
func StallJournal(e *Engine) (stalled <-chan struct{}, release func(error)) {
	j := e.h.journal
	ch, rel := make(chan struct{}), make(chan error, 1)
	j.mu.Lock()
	j.beforeFlush = func() error {
		close(ch)
		return <-rel
	}
	j.mu.Unlock()
	return ch, func(err error) { rel <- err }
}
