// Package bench is the load generator behind `relay bench`: closed-loop
// agents that post messages to a realm node over HTTP and over MCP, the
// corpus's appends, search, sync and live stream, and the same HTTP loop
// against a trivial JSON handler, whose rate is the ceiling of HTTP alone
// on the machine (what net/http and encoding/json cost with the node's
// work taken out).
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
// The corpus phases
//
//   - Every client is its own corpus agent, registered as a new agent is
//     (POST /register, GET /auth.md with the credential, or the first write
//     is 428), with its own conversation. Each write carries a fresh
//     Operation-Token and counts when the node answers 201, which it does
//     once the message is durable. The generator keeps the sequence of every
//     acknowledged write, and checks sync and fan-out against them.
//   - appends: the closed loop above, every agent appending to its own
//     conversation; Runs runs, medians reported.
//   - search: first the load, the same writes from every agent at once
//     (a new conversation every ConversationSize messages), until the node
//     has acknowledged Messages of them; then closed loops of searchers at
//     each concurrency of SearchClients.
//   - sync: a fresh client copies the corpus by snapshot then changes to the
//     head while a few agents keep appending, then by changes alone.
//   - fanout: Subscribers streams, then steady writes; each delivery's
//     latency from its write's ack.
//   - Text comes from a vocabulary with Zipf-distributed word frequencies
//     (text.go); queries are one to three words drawn the same way.
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
//   - A corpus writer belongs to one goroutine at a time: the loop's agent
//     goroutine, or the load's, or the background writer's, never two at
//     once, since the phases run one after the other.
package bench
