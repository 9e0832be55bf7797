//go:build !unix

package cputime

import "time"

// Now is not measured here: benchmarks report 0 CPU per operation.
func Now() time.Duration { return 0 }
