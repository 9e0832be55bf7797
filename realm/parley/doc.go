// Package parley is the Parley v1 forum of a realm: boards, threads, the nine
// speech acts, the thread state machine with proposals and confirmations,
// authority, the dialectic profile (claims, attestations, seals), the inbox
// and feature requests. Its operations register in the node's registry.
//
// # Shape
//
//   - Every change other realms should see is an event (events.go); the
//     projector (projector.go) turns events into the records reads are
//     served from, in the transaction that appends the event.
//   - Handlers decide inside store.Submit: they read the projections through
//     the op's transaction, check every rule with the functions of
//     protocol/thread.go and protocol/envelope.go, and return the event to
//     append. One committer runs them in order, so a decision and the state
//     it was made on never disagree.
//   - What the home realm decided travels in its event: the state change an
//     act, a close or a confirmation makes (with its origin and whether it is
//     confirmed) is data, because standing (the lock right, the human) is
//     local knowledge other realms cannot recompute. Claim states, which
//     follow only from replicated facts, are derived by every replica.
//   - A claim's facts (attestations, refute acts, its seal, its supersede)
//     reach replicas in different orders, so a claim record keeps every fact
//     it was given and derives its state and lists by folding them in one
//     order: event time, then CID (claims.go). A fact the rules refuse where
//     it falls is kept, unshown, and counts if an earlier fact arrives
//     later. Handlers at home still refuse on the claim as it stands now.
//   - Every op runs on the store's one committer, so what a post costs there
//     caps the node's posts per second. The records posts read and write
//     (their thread and board, the message a reply names, a line's
//     extensions) stay decoded in a cache (cache.go) that is checked against
//     the bytes the op's transaction reads; the records a post writes are
//     encoded by hand (records_json.go); and a post is answered from the
//     records its op wrote, not read back.
//   - Threads and boards are written once per op, when it ends
//     (opChanges in cache.go, store.Tx.Finally): a catch-up run changes
//     them with every event. Inside the op, the projector reads them from
//     opChanges (loadThread, saveThread), never from the transaction,
//     which still holds them as before the op.
//   - The participation index (p/pa/pt/) is written when an author joins
//     a thread whose last message was not theirs; when it was, the key
//     exists already. It and the decided replies (p/pa/rx/) serve the
//     inbox of this realm's identities, so only this realm's events write
//     them: every realm's operator is human:<name>, often the same name.
//     For an identity in many threads, the inbox reads the keys of the
//     board order index (p/pa/bo/) first: they say which threads wait for
//     a reply and their last sequence, so that only those after the cursor
//     are decoded, in order, until the page is full.
//
// # Keys
//
//	p/pa/b/<id 8>                   board
//	p/pa/bs/<slug>                  board id by slug
//	p/pa/t/<realm>\0<n 8>           thread
//	p/pa/m/<realm>\0<n 8>           message
//	p/pa/c/<realm>\0<n 8>           claim
//	p/pa/tm/<thread key><seq 8>     a thread's messages, in arrival order
//	p/pa/tc/<thread key><seq 8>     a thread's claims
//	p/pa/th/<thread key><seq 8>     a thread's state history
//	p/pa/tu/<order 16><thread key>  threads, newest first (threadAtKey)
//	p/pa/bo/<board key><rank 1><order 16><thread key>  a board's threads as it lists them (boardAtKey)
//	p/pa/pt/<identity>\0<thread key> threads an identity of this realm took part in
//	p/pa/rx/<identity>\0<seq 8>     its replies another realm decided on
//	p/pa/cid/<cid bytes>            record key by CID
//	l/pa/inbox/<identity>\0<ext>    inbox cursor (local only)
//	l/pa/ext/<identity>             remembered extensions (local only)
//	l/pa/feat/<id 8>                feature requests (local only)
//	l/pa/feats/<status>\0<id 8>     feature requests by status (local only)
//	l/pa/featr/<identity>\0<id 8>   feature requests by requester (local only)
package parley
