// Package bench is the load generator behind `relay bench`: closed-loop
// agents that post messages to a realm node over HTTP and over MCP, and the
// same loop against a trivial JSON handler, whose rate is the ceiling of
// HTTP alone on the machine (what net/http and encoding/json cost with the
// node's work taken out).
//
// Terminology
//
//   - An agent is one worker of the closed loop: it holds its own token and
//     its own thread, and sends its next request when the last one answers.
//     Concurrency is the number of agents.
//   - A phase is one loop against one target: http, mcp or ceiling. Each has
//     a warmup, whose requests are neither counted nor timed, then a
//     measured window.
//   - Only successes count toward the rate (HTTP 200; an MCP result without
//     isError). Everything else is an error, counted by kind.
//
// Tricky bits
//
//   - The generator shares the machine with the node when the node runs
//     in-process, so client and server compete for the same cores. The
//     ceiling phase runs under the same conditions, which is why the ratio to
//     it is the figure to compare across machines, not the raw rate.
//   - Latencies are kept per agent in a preallocated slice (no lock, no
//     sharing) and merged and sorted once at the end; percentiles are by
//     nearest rank.
//   - A request that starts before the end of the window is allowed to
//     finish and counts; the window's length is measured up to the last one
//     to finish, so the rate is not inflated by a fixed divisor.
package bench
