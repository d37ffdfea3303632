package dynamolocal

// SetBeforeRename sets a hook that runs after a snapshot's temporary file is
// written and synced, just before it is renamed over the target; an error
// aborts the snapshot, as a failing disk would.
func SetBeforeRename(e *Engine, fn func(tmp string) error) {
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	e.beforeRename = fn
}

// SetBeforeCompact sets a hook that runs after a snapshot of the data file
// is written, before the journal is compacted; an error stops there, as a
// crash at that point would.
func SetBeforeCompact(e *Engine, fn func() error) {
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	e.beforeCompact = fn
}
