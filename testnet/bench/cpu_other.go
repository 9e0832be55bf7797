//go:build !unix

package bench

// cpuSample measures nothing where getrusage and /proc/stat are missing.
type cpuSample struct{}

func sampleCPU() cpuSample { return cpuSample{} }

func (cpuSample) since() *CPUUse { return nil }
