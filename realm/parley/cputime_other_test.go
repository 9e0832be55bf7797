//go:build !unix

package parley

import "time"

// cpuTime is not measured here: benchmarks report 0 CPU per event.
func cpuTime() time.Duration { return 0 }
