//go:build unix

package dynamolocal

import (
	"errors"
	"os"
	"syscall"
)

// lockFile creates path if needed and takes an exclusive lock on it,
// which the process holds until it closes the file or exits (a crash
// releases it too). It fails with errInUse when another process holds it.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errInUse
		}
		return nil, err
	}
	return f, nil
}
