package protocol

import "errors"

var (
	// ErrNonCanonical is returned when bytes decode but are not the canonical
	// DAG-CBOR encoding of what they decode to.
	ErrNonCanonical = errors.New("protocol: not canonical dag-cbor")
	// ErrEventTooLarge is returned for an encoded event above MaxEventSize.
	ErrEventTooLarge = errors.New("protocol: event too large")
	// ErrBadSignature is returned when an event's signature does not verify.
	ErrBadSignature = errors.New("protocol: bad signature")
	// ErrInvalidEvent is returned for an event whose fields break the rules
	// (empty type, zero seq, prev missing or present where it must not be …).
	ErrInvalidEvent = errors.New("protocol: invalid event")
	// ErrChainBroken is returned when an event does not follow the head it is
	// checked against: its seq is not the next one or prev is not the head.
	ErrChainBroken = errors.New("protocol: event does not extend the chain")
	// ErrInvalidName is returned by the parsers of names, identities and keys.
	ErrInvalidName = errors.New("protocol: invalid name")
)
