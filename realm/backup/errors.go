package backup

import "errors"

var (
	// ErrNotExport is returned for input that does not start as an export
	// file does, or is of a format version this relay does not read.
	ErrNotExport = errors.New("backup: not a relay export file")
	// ErrCorrupt is returned when a file's bytes are damaged or missing: a
	// checksum, a length, the order or the counts of its frames, data after
	// its end, or an end before its trailer. The error says where.
	ErrCorrupt = errors.New("backup: corrupt export file")
	// ErrUnverified is returned when an event or blob fails its check: its
	// encoding, CID, signature or place in its realm's chain. It wraps the
	// protocol error (protocol.ErrBadSignature, protocol.ErrChainBroken …).
	ErrUnverified = errors.New("backup: export does not verify")
	// ErrKeyMismatch is returned when the file's key for a realm is not the
	// one the caller knows for it.
	ErrKeyMismatch = errors.New("backup: realm key differs from the known one")
)
