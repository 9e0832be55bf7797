//go:build unix

package bench

import (
	"os"
	"strconv"
	"strings"
	"time"

	"relay/testnet/cputime"
)

// cpuSample is a point to measure CPU use from.
type cpuSample struct {
	at          time.Time
	self        time.Duration // user and system time of this process
	busy, total uint64        // machine ticks from /proc/stat
	cores       int           // cpuN lines of /proc/stat
	ok          bool
}

func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now()}
	s.self = cputime.Now()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[1:] {
		if len(l) > 3 && l[:3] == "cpu" && l[3] >= '0' && l[3] <= '9' {
			s.cores++
		}
	}
	f := strings.Fields(lines[0])
	if len(f) < 5 || f[0] != "cpu" || s.cores == 0 {
		return s
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return s
		}
		// guest and guest_nice (9th and 10th) are already in user and nice.
		if i >= 8 {
			break
		}
		s.total += n
		if i != 3 && i != 4 { // idle, iowait
			s.busy += n
		}
	}
	s.ok = true
	return s
}

// since is the CPU use between s and now; nil when /proc/stat or
// getrusage is not there.
func (s cpuSample) since() *CPUUse {
	e := sampleCPU()
	wall := e.at.Sub(s.at).Seconds()
	if !s.ok || !e.ok || wall <= 0 || e.total <= s.total {
		return nil
	}
	machine := float64(e.busy-s.busy) / float64(e.total-s.total) * float64(e.cores)
	self := (e.self - s.self).Seconds() / wall
	return &CPUUse{ProcessCores: round2(self), OtherCores: round2(max(0, machine-self))}
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
