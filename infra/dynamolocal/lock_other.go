//go:build !unix

package dynamolocal

import "os"

// lockFile creates path; this platform has no advisory lock, so a second
// engine on the same data file is not detected.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
