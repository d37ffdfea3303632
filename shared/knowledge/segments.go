package knowledge

// SegmentKey returns the blob key of document docID's segment (its chunks
// as JSON) in knowledge base kbID: what a data export copies.
func SegmentKey(kbID, docID string) string { return segmentKey(kbID, docID) }
