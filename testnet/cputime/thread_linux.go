//go:build linux

package cputime

import (
	"syscall"
	"time"
	"unsafe"
)

const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID

// Thread is the calling OS thread and the CPU time it has used so far: for
// timing a stretch of code on one goroutine, whatever else runs on the
// machine. A goroutine may move to another thread meanwhile; a stretch
// that ends on another thread than it began is not measured.
func Thread() (id int, cpu time.Duration) {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return syscall.Gettid(), time.Duration(ts.Nano())
}
