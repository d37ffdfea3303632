package dynamolocal

// RewriteKeyConditions exposes rewriteKeyConditions to the external tests.
var RewriteKeyConditions = rewriteKeyConditions

// BackendItemsRead is how many stored items the layer has read to answer
// Query and Scan requests (from its own store; the name is older).
func BackendItemsRead(e *Engine) int64 { return e.h.itemsRead.Load() }

// Crash stops e as a killed process would: no final snapshot, journal
// records not yet written to the file are lost, the lock is released.
func Crash(e *Engine) { e.crash() }
