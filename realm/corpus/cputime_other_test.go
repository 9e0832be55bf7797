//go:build !unix

package corpus

import "time"

// cpuTime is not measured here: benchmarks report 0 CPU per event.
func cpuTime() time.Duration { return 0 }
