package dynamolocal

// SetBeforeRename sets a hook that runs after a snapshot's temporary file is
// written and synced, just before it is renamed over the target; an error
// aborts the snapshot, as a failing disk would.
func SetBeforeRename(e *Engine, fn func(tmp string) error) {
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	e.beforeRename = fn
}
