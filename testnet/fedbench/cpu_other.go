//go:build !unix

package fedbench

import "time"

// processCPU is 0 where getrusage is missing: no CPU figure.
func processCPU() time.Duration { return 0 }
