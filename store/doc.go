// Package store keeps a realm node's state in one Badger database: the event
// log (the single source of truth), the projections derived from it, and the
// local-only tables that never replicate.
//
// Appending an event and updating every projection it touches happen in one
// Badger transaction, so projections never disagree with the log and can be
// rebuilt from it (Rebuild). A write is acknowledged only once durable: Badger
// runs with SyncWrites, and Submit and Ingest return after the commit of the
// transaction holding their op.
//
// # Key layout
//
//	e/c/<cid bytes>              → node sequence (8 BE) ‖ raw signed event
//	e/r/<realm>\x00<seq 8 BE>    → cid bytes          (a realm's chain)
//	e/h/<realm>                  → seq (8 BE) ‖ cid   (its head)
//	e/s/<sequence 8 BE>          → cid bytes          (arrival order)
//	m/schema                     → SchemaVersion (8 BE)
//	m/seq                        → last node sequence (8 BE)
//	m/id/<name>                  → last id handed out by Tx.NextID (8 BE)
//	m/rebuilding                 → present while a Rebuild is incomplete
//	x/eq/<realm>\x00<seq>‖<cid>  → raw event: both sides of an equivocation
//	l/…                          → local-only tables (owned by realm/)
//	p/…                          → projections (owned by projectors)
//
// e/, m/ and x/ are written only by the store (Tx.Set refuses them with
// ErrReservedKey); projector prefixes must lie under p/, so Rebuild can never
// delete the log. Realm names never contain NUL, so e/r/<realm>\x00 is a
// prefix of that realm's keys only.
//
// # Terminology
//
//   - seq: an event's position in its realm's chain, dense, the same on every
//     node (federation).
//   - Sequence: the position at which this node stored an event, local or
//     replicated (the corpus `sequence`, cursor of changes and SSE). Dense in
//     this implementation, but consumers must allow gaps.
//   - op: one Submit, Ingest or Rebuild step, run on the committer.
//   - batch: the ops committed by one Badger transaction (one fsync).
//
// # Invariants
//
//   - One writer: the committer goroutine. Reads (View and the read methods)
//     run concurrently on Badger snapshots and see committed state only.
//   - An event, its indexes, the head, m/seq and every projection of the
//     event are in the same transaction; a crash keeps all or none of them.
//   - Heads and the node sequence in memory advance only after a successful
//     commit; a failed commit leaves them (and the disk) as they were.
//   - Sequence() = m/seq = the last e/s/ key; Open refuses a store where they
//     disagree.
//
// # Tricky bits
//
//   - The per-op overlay. Ops of one batch share a Badger transaction, yet a
//     failing op must leave no trace. So an op's writes are buffered in its
//     Tx and moved into the batch transaction only when the op succeeds. Get
//     reads the overlay, then the batch transaction (earlier ops), then
//     committed state. Iterate merges the overlay as it was when Iterate
//     began; writes made inside the callback are not visited.
//   - Batch splitting. Badger refuses a transaction past ~15% of the memtable
//     (ErrTxnTooBig), and reports it while the op's overlay is half moved in,
//     with no way to take those writes back. The committer then rebuilds the
//     transaction from the overlays of the ops already kept, commits them,
//     and moves the op's overlay into a fresh transaction. The op is not run
//     again: it read exactly the state that is now committed. An op too large
//     for a transaction of its own fails alone.
//   - Errors that keep writes. Ingest of an equivocation returns
//     ErrEquivocation yet commits the evidence (keepWrites).
//   - Acks. Every op of a batch, failed ones included, is answered after the
//     commit, so a refusal never reports state that did not become durable.
//     A caller whose context ends while its op is still queued gets
//     ctx.Err() and the op never runs; once running, the caller waits.
//   - Panics in an op are recovered and fail that op only.
//   - fn passed to Submit must not call Submit, Ingest or Rebuild (the
//     committer would wait on itself); View inside fn is allowed but does not
//     see the batch: read through tx.
//   - Group commit: the committer takes what is queued (up to MaxBatch) and
//     never waits for more, so a lone writer pays one fsync per op while
//     concurrent writers share one.
package store
