// Package store keeps a realm node's state in one Badger database: the event
// log (the single source of truth), the projections derived from it, and the
// local-only tables that never replicate.
//
// Appending an event and updating every projection it touches happen in one
// Badger transaction, so projections never disagree with the log and can be
// rebuilt from it (Rebuild). Projectors name their versions (Versioned),
// and EnsureProjections rebuilds projections made by other versions, so an
// upgrade that changes what a projector derives never serves stale
// records. A write is acknowledged only once durable:
// Submit, Ingest and Restore return after the transaction holding their op
// was appended to the store's write-ahead log and synced (wal.go), and then
// committed to Badger, which itself runs without SyncWrites; Open replays the
// log into Badger before anything reads it.
//
// # The pipeline
//
// Writes go through two goroutines, so that running ops overlaps the fsync:
//
//   - The committer (stage 1) runs ops one at a time (fn, building and
//     signing the event, projectors), each into its own overlay, and adds
//     them to the current batch. Whenever the writer is free it hands the
//     batch over and starts the next one at once.
//   - The writer (stage 2) takes batches in order, moves the kept ops'
//     overlays into a Badger transaction (blind writes: it never reads),
//     appends the same writes to the write-ahead log and fdatasyncs it,
//     commits the transaction, publishes the heads and sequence reached,
//     acks the batch's ops and opens a fresh read-only snapshot for the
//     committer.
//
// The hand-off is unbuffered: one batch commits while the next fills, and a
// batch holds at most MaxBatch ops, so memory is bounded. A lone writer pays
// one fsync per op; under load a batch holds the ops that arrived during the
// previous commit. After a batch of several ops, the writer waits a moment
// (at most half that batch's time) while the next holds fewer than half as
// many, so that a crowd waiting for its acks does not fall into a convoy of
// one large batch and one of a single op (batching.go).
//
// # Key layout
//
//	e/v/<realm>\x00<seq 8 BE>    → node sequence (8 BE; 0 while parked) ‖ cid length (1) ‖ cid ‖ raw signed event
//	e/i/<cid bytes>              → <realm>\x00<seq 8 BE>   (the event's place)
//	e/h/<realm>                  → seq (8 BE) ‖ cid        (the realm's head)
//	e/n/<sequence 8 BE>          → <realm>\x00<seq 8 BE>   (arrival order)
//	m/schema                     → SchemaVersion (8 BE)
//	m/seq                        → last node sequence (8 BE)
//	m/id/<name>                  → last id handed out by Tx.NextID (8 BE)
//	m/rebuilding                 → present while a Rebuild is incomplete: the sequence it has
//	                               replayed up to, the sequence it began at, the projector versions
//	m/projections                → the projectors' versions the projections were made by
//	m/wal                        → the last write-ahead record whose writes Badger holds (8 BE)
//	wal/<first record, 16 hex>.wal  (files beside Badger's: the write-ahead log)
//	x/eq/<realm>\x00<seq>‖<cid>  → raw event: both sides of an equivocation
//	x/pk/<n 8 BE>                → a parked event: when, its place, why (park.go)
//	x/pr/<n 8 BE>                → a parked event a projector refused: the same (retryRefused)
//	x/prv                        → the projector versions that last tried the refused events
//	l/…                          → local-only tables (owned by realm/)
//	p/…                          → projections (owned by projectors)
//
// e/, m/ and x/ are written only by the store (Tx.Set refuses them with
// ErrReservedKey); projector prefixes must lie under p/, so Rebuild can never
// delete the log. Realm names never contain NUL, so e/v/<realm>\x00 is a
// prefix of that realm's keys only. A realm's chain is stored in seq order,
// so a range of it (catch-up) is one scan; reading by CID or in arrival
// order takes one more read, through the index.
//
// # Terminology
//
//   - seq: an event's position in its realm's chain, dense, the same on every
//     node (federation).
//   - Sequence: the position at which this node stored an event, local or
//     replicated (the corpus `sequence`, cursor of changes and SSE). Dense in
//     this implementation, but consumers must allow gaps.
//   - op: one Submit, Ingest, Restore or Rebuild step, run on the committer.
//     Restore appends many checked events in one op (the bulk path of an
//     import).
//   - batch: the ops the committer hands to the writer at once; committed by
//     one Badger transaction (one fsync), or several when it is too big.
//   - overlay: an op's buffered writes; a batch's overlay merges its kept
//     ops' overlays.
//   - snapshot: the committer's long-lived read-only Badger transaction.
//
// # Invariants
//
//   - One goroutine runs ops (the committer), one commits (the writer).
//     Reads (View and the read methods) run concurrently on Badger snapshots
//     and see committed state only.
//   - An op reads, newest first: its own overlay, the earlier kept ops of its
//     batch, every batch handed to the writer that its snapshot does not
//     hold, then the snapshot. That is exactly the state the ops before it
//     leave, committed or not.
//   - An event, its indexes, the head, m/seq and every projection of the
//     event are in the same transaction; a crash keeps all or none of them.
//     A parked event (park.go) is in its chain without e/n/ nor projections
//     until one transaction gives it both, with its x/pk/ record deleted.
//   - The writer commits batches in hand-off order and ops in run order; it
//     never drops a kept op alone, since later ops may have read its writes.
//   - Heads and the node sequence that Heads, Sequence and State report
//     advance only after a successful commit, by the ops it held. The
//     committer keeps its own copy, ahead of them by the batches in flight.
//   - Sequence() = m/seq = the last e/n/ key; Open refuses a store where they
//     disagree.
//   - After a failed commit the store is failed: no op is ever committed
//     again by this Store value.
//
// # Tricky bits
//
//   - The per-op overlay. A failing op must leave no trace, so its writes are
//     buffered in its Tx and join the batch's overlay only when it succeeds.
//     Iterate merges the overlays as they were when Iterate began; writes
//     made inside the callback are not visited.
//   - Why a long-lived snapshot. Badger's NewTransaction (read or write)
//     waits while a commit is in flight, so the committer cannot open one per
//     op or batch without losing the overlap. It reads through a snapshot
//     plus the overlays of the batches committed after it was taken. Right
//     after each commit, before the next, the writer opens a new snapshot and
//     publishes it with the id of the last batch it holds; the committer
//     switches to it between ops, drops the overlays it holds and discards
//     the old one. After a batch that wrote nothing the writer publishes
//     only the id, with the snapshot not yet taken if there is one, so that
//     the committer drops that batch too. Exclusive ops (Rebuild) drain the pipeline first and take
//     a fresh snapshot after, as they write to Badger directly.
//   - Batch splitting. The writer first moves the batch's merged overlay into
//     one transaction (fewer writes: later ops overwrite the head, m/seq and
//     counters). Badger refuses a transaction past ~15% of the memtable
//     (ErrTxnTooBig); the writer then starts again op by op. When an op's
//     overlay is refused half moved in, with no way to take those writes
//     back, it rebuilds the transaction from the ops before that op, commits
//     it, acks them and goes on with the op in a fresh transaction. The
//     writer cannot fail an op alone (later ops have read it), so the
//     committer refuses, before keeping it, an op Badger would refuse: too
//     large for a transaction of its own (by Badger's own size rule), a value
//     too large, a key under Badger's "!badger!" prefix. Such an op fails
//     alone. Should Badger refuse one anyway, the store fails (below).
//   - Failure. If a commit fails, the store enters the failed state: that
//     batch's ops not yet committed (refused ones included, whose refusal may
//     rest on the failed writes), every op behind them in the pipeline and
//     every later Submit, Ingest and Rebuild get ErrFailed wrapping the
//     cause, and State().Status is "failed". The committer's heads and
//     sequence are no longer trusted; the reported ones stay at the last good
//     commit. Badger may have kept part or all of the failed batch (in the
//     memtable, visible to reads, or on disk): reopening recovers the state
//     its log holds, each transaction all or none.
//   - Errors that keep writes. Ingest of an equivocation returns
//     ErrEquivocation yet commits the evidence (keepWrites).
//   - An op's end. Tx.Finally functions run once the op's function and its
//     projectors returned, before the op's writes join the batch: with ok
//     (and may still write) when the op succeeded so far, without when it
//     failed or panicked. ok does not promise the writes commit (fits, a
//     failed commit). A projector that rewrites one record for every
//     event of an op (Parley's threads and boards) writes it there once;
//     until then it must serve that record to itself from memory, as the
//     transaction holds it as before the op.
//   - Acks. Every op of a batch, failed ones included, is answered by the
//     writer after the commit of its batch (and so of every batch before),
//     so a refusal never reports state that did not become durable.
//     A caller whose context ends while its op is still queued gets
//     ctx.Err() and the op never runs; once running, the caller waits.
//   - Panics in an op are recovered and fail that op only.
//   - fn passed to Submit must not call Submit, Ingest or Rebuild (the
//     committer would wait on itself); View inside fn is allowed but sees
//     committed state only, and may wait for a commit in flight: read
//     through tx.
package store
