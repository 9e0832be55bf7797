//go:build !unix

package store

import "time"

// cpuTime is not measured here: benchmarks report 0 CPU per event.
func cpuTime() time.Duration { return 0 }
