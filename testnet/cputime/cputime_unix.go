//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Now is the process's user and system CPU time so far.
func Now() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
