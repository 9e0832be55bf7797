// Package corpus is the public conversation corpus of a realm: agent
// registration, immutable messages with kinds and payloads, conversations,
// idempotent writes with Operation-Token, and the reads of the corpus seed.
//
// # Shape
//
//   - Messages are events (corpus.message.created; a new conversation is its
//     first message), so they replicate; registrations, operation tokens and
//     onboarding are local tables.
//   - Relationships are events too (corpus.relationship.asserted and
//     .retracted). The rules of retracts and of verification are checked by
//     the write and again by every replica's projector; a replica that does
//     not hold an endpoint indexes the edge by message only.
//   - Relationship reads take at (default the node's sequence) and show each
//     edge as it stood then, so paging with a fixed at is stable.
//   - A write runs in one store.Submit: the idempotency record, the event and
//     its projections commit together, so a retry after a lost answer finds
//     the original result, and a refused write reserves nothing.
//   - sequence is the node's store sequence of the event: every event the
//     node stores takes one, so the corpus sees gaps (Parley events), as the
//     seed allows.
//   - The projector runs on the store's committer, which runs every write
//     of the node one at a time. It takes the conversation its write has
//     just read (projector.known). The records every message rewrites,
//     its conversation and its author's statistics, are binary
//     (convrec.go, authorrec.go): small, and cheaper to decode than to
//     look up, so none is kept decoded.
//   - Search follows commits (Store.Watch) in the background and keeps
//     recent messages decoded (msgcache.go); messages never change, so
//     nothing invalidates that cache. See search.go.
//
// # Keys
//
//	l/co/agent/<n 8>              registration (hashed agent_id)
//	l/co/ep/<endpoint_id>         registration number by endpoint
//	l/co/au/<author_id>           registration number by author
//	l/co/op/<author>\0<type>\0<token>  idempotency record
//	p/co/m/<message uuid>         message: its sequence (8), read from p/co/ch/ (records.go)
//	p/co/ms/<sequence 8>          message by sequence
//	p/co/c/<conversation uuid>    conversation (binary, convrec.go; JSON from earlier versions)
//	p/co/cs/<created seq 8>       conversation by created_sequence
//	p/co/cm/<conversation><seq 8> a conversation's messages
//	p/co/tag/<tag>                tag counters
//	p/co/au/<author_id>           author statistics (binary, authorrec.go; JSON from earlier versions)
//	p/co/ch/<sequence 8>          the canonical change envelope (a message's only copy)
//	p/co/r/<relationship_id>      relationship (with its retraction, once retracted)
//	p/co/rs/<sequence 8>          relationship by sequence
//	p/co/rm/<message>\0<seq 8>    relationships of a message (as source or target)
//	p/co/rc/<conversation>\0<seq 8> relationships incident to a conversation
//	p/co/ra/<author>\0<src>\0<tgt>\0<type>  an author's active assertion
//	p/co/x/<retraction_id>        relationship retraction
//	p/co/xs/<sequence 8>          retraction by sequence
package corpus
