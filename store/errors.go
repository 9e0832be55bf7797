package store

import "errors"

var (
	// ErrNotFound is returned by reads of a key, event or counter the store
	// does not hold.
	ErrNotFound = errors.New("store: not found")
	// ErrClosed is returned by every call made after Close has begun.
	ErrClosed = errors.New("store: closed")
	// ErrFailed is returned by every write (Submit, Ingest, Rebuild) once a
	// commit has failed, wrapped with that commit's error. The store then no
	// longer knows what Badger kept of the failed batch, so it refuses writes
	// until it is reopened, which recovers the last state Badger made durable.
	// Reads still work. State().Status reports "failed".
	ErrFailed = errors.New("store: failed")
	// ErrReadOnly is returned by Set, Delete and NextID on the Tx of a View.
	ErrReadOnly = errors.New("store: read-only transaction")
	// ErrDuplicate is returned by Ingest for an event the store already holds
	// (same realm, seq and CID). Replication treats it as success.
	ErrDuplicate = errors.New("store: duplicate event")
	// ErrEquivocation is returned by Ingest for a second, different event at a
	// (realm, seq) the store already holds. Both events are kept as evidence
	// under x/eq/ (see Equivocations); the caller should stop accepting the
	// realm and tell the operator.
	ErrEquivocation = errors.New("store: equivocation")
	// ErrGap is returned by Ingest for an event beyond the next seq of its
	// realm: the caller should fetch the missing range first.
	ErrGap = errors.New("store: gap in realm chain")
	// ErrDependency is what a projector wraps when an event refers to a
	// record of another realm that is not held yet (a conversation it
	// appends to, a claim it attests, a message it relates): the event is
	// not wrong, it came early; it stores once the record has arrived.
	ErrDependency = errors.New("store: the event refers to a record not held yet")
	// ErrStop, returned from an Iterate callback, ends the iteration early;
	// Iterate then returns nil.
	ErrStop = errors.New("store: stop iteration")
	// ErrLocked is returned by Open when another process (a running node)
	// holds the store's directory: Badger allows one at a time.
	ErrLocked = errors.New("store: in use by another process")
	// ErrSequence is returned by Restore when the store does not hold as
	// many events as the op was queued after: a chunk before it failed.
	ErrSequence = errors.New("store: not at the expected sequence")
	// ErrOtherRealm is returned by Open when the store holds the chain of
	// a realm other than Config.Realm signed with Config.Key: the data
	// directory belongs to that realm.
	ErrOtherRealm = errors.New("store: the store is another realm's")
	// ErrReservedKey is returned by Set and Delete of a key under e/, m/ or x/:
	// the store alone writes the log, its meta and the evidence.
	ErrReservedKey = errors.New("store: reserved key")

	// errPanic wraps a panic an op or exclusive op recovered from.
	errPanic = errors.New("store: panic")
	// errFault wraps what the store refuses of an op that Badger would
	// refuse: a key under Badger's prefix, a value too large.
	errFault = errors.New("store")
)
