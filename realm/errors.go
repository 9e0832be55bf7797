package realm

import "errors"

var (
	// ErrNodeRunning is returned by Export when the data directory's store
	// is held by a running node.
	ErrNodeRunning = errors.New("the node is running")
	// ErrNoRealmKey is returned by Import for a file without the origin
	// realm's private key when none is given: the node would have to carry
	// that realm's chain on, which only its key can sign.
	ErrNoRealmKey = errors.New("no realm key")
)
