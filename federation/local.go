package federation

import (
	"context"
	"encoding/json"
	"errors"

	"relay/protocol"
	"relay/store"
)

// The federation's local tables: never replicated, each realm's own.
var (
	pfxDir        = []byte("l/fed/dir/")      // realm → its pinned, newest descriptor
	pfxConflict   = []byte("l/fed/conflict/") // realm \0 peer → a refused claim to a pinned name
	pfxPeer       = []byte("l/fed/peer/")     // peer ID → peer record
	pfxBlock      = []byte("l/fed/block/")    // realm → block record
	pfxQuarantine = []byte("l/fed/quar/")     // realm → why its events are no longer taken
	pfxAcked      = []byte("l/fed/acked/")    // realm → the equivocation evidence the operator lifted a quarantine over
	pfxRefused    = []byte("l/fed/refused/")  // realm \0 seq → a parked event refused, its realm quarantined for it
	keyRestored   = []byte("l/fed/restored")  // present from an import until this realm's chain was compared with a peer's
)

// MarkRestored marks the store of st, a node not running (an import), as
// restored: once it federates, it authors no event before it has compared
// its chain with a peer that carries it (own.go), since events it signed
// after the export may be held elsewhere.
func MarkRestored(ctx context.Context, st *store.Store) error {
	return putLocal(ctx, st, keyRestored, []byte{})
}

func fkey(pfx []byte, parts ...string) []byte {
	k := append([]byte(nil), pfx...)
	for i, p := range parts {
		if i > 0 {
			k = append(k, 0)
		}
		k = append(k, p...)
	}
	return k
}

// putLocal writes (or, with v nil, deletes) one local record durably.
func putLocal(ctx context.Context, st *store.Store, key []byte, v any) error {
	_, err := st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		if v == nil {
			return nil, tx.Delete(key)
		}
		var b []byte
		switch x := v.(type) {
		case []byte:
			b = x
		default:
			var err error
			if b, err = json.Marshal(v); err != nil {
				return nil, err
			}
		}
		return nil, tx.Set(key, b)
	})
	return err
}

// hasLocal reports whether a local record is kept under key.
func hasLocal(st *store.Store, key []byte) (bool, error) {
	found := false
	err := st.View(func(tx *store.Tx) error {
		_, err := tx.Get(key)
		found = err == nil
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	return found, err
}

// loadLocal calls fn with every record under pfx.
func loadLocal(st *store.Store, pfx []byte, fn func(key, val []byte) error) error {
	return st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfx, false, func(k, v []byte) error { return fn(k[len(pfx):], v) })
	})
}
