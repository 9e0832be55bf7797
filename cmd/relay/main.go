// Command relay runs and operates a realm node.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
)

// gcPercent is the garbage collector's target when GOGC is not set. At
// Go's default of 100, a node under steady writes stalled every write for
// about 300 ms whenever Badger started a memtable: the arena (then 64 MiB) it
// allocates at once was paid for by the allocating goroutine, Badger's
// only writer, with collection work and with scavenging memory the heap
// had just returned. At 200 the heap keeps room for it (the heap may grow
// to three times what is live rather than twice), and the worst stall of a
// post fell to under 100 ms (docs/BENCHMARKS.md). GOGC, when set, wins.
const gcPercent = 200

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	if err := run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
}
