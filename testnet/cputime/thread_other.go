//go:build !linux

package cputime

import "time"

// Thread is not measured here: it reports thread 0 and no time.
func Thread() (id int, cpu time.Duration) { return 0, 0 }
