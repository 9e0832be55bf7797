// Package federation connects realms: the realm's libp2p identity (its
// ed25519 key, so a realm's event-signing key is also its peer ID), the
// host, peering, the realm directory, live propagation over GossipSub and
// catch-up over the sync protocol.
//
// # Tricky bits
//
//   - A gossip message is a run of consecutive events of its topic's realm
//     (batch.go): the origin sends together what it committed while its
//     last message went out. Every replica decodes every event of a run and
//     checks its links, but verifies only the newest event's signature,
//     which commits to every event before it (authenticRun says why that
//     is sound); only when it fails are the others verified one by one. A
//     run with a forged or malformed event is refused; the authentic events
//     before it are stored.
//   - Runs are validated concurrently, so they arrive at the store in any
//     order. A lane per realm (ingest.go) queues each run at the store as
//     soon as it follows the runs queued before it, so runs in flight join
//     the same commits; a run that comes early is held, verified, until the
//     run before it is queued, and pulled by catch-up if that run has not
//     come within gapGrace.
//   - A receiver relays a run it had from its origin no sooner than
//     relayDelay after it came: the origin has flooded it to every peer it
//     reaches, and their IDONTWANTs, which come by then, keep it from being
//     sent to them again. A realm reached only through relays waits that
//     much per relay that had the run from the origin.
//   - Catch-up verifies only the newest signature of each range: the store
//     checks every link, and that signature commits to them all.
//   - A blocked realm's events are neither stored, served nor relayed, but
//     catch-up reads those past the held head at a peer that holds them
//     (blocked.go), checked as the realm's and kept nowhere, so that the
//     node can refuse the realm's replies into its threads: their authors
//     would otherwise wait for a word that never comes.
//   - Lock order: a lane's mu before Service.mu.
package federation
