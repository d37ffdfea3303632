//go:build !linux

package sandbox

import (
	"os"
	"syscall"
	"time"
)

// limitsEnforced: outside Linux a worker sets no kernel limits; it still
// isolates crashes, is killed at its deadline, and has a soft Go heap
// limit.
const limitsEnforced = false

func sysProcAttr() *syscall.SysProcAttr { return nil }

func selfPath() (string, error) { return os.Executable() }

func applyLimits(int64, time.Duration, uint64) hello { return hello{PID: os.Getpid()} }

func claimHeapRemainder() ([][]byte, int64, uint64, error) { return nil, 0, 0, nil }

func usage() (time.Duration, int64) { return 0, 0 }

func exitInfo(*os.ProcessState) (bool, int64) { return false, 0 }
