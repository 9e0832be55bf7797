package federation

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"relay/protocol"
	"relay/store"
)

// MaxRealms bounds the directory: a peer cannot make a node follow an
// endless stream of made-up realms.
const MaxRealms = 4096

// ErrDirectoryFull is returned for a new realm when the directory holds
// MaxRealms already.
var ErrDirectoryFull = errors.New("federation: realm directory full")

// maxConflicts bounds the refused claims kept for the operator.
const maxConflicts = 256

// ErrKeyConflict is returned when a descriptor claims a realm name the
// directory has pinned to another key.
var ErrKeyConflict = errors.New("federation: realm name pinned to another key")

// DirEntry is what the directory knows of one realm.
type DirEntry struct {
	Realm  protocol.Realm
	Key    ed25519.PublicKey
	PeerID peer.ID
	Addrs  []string
	At     time.Time // the descriptor's own time
	raw    []byte
}

// Conflict is a refused claim: a descriptor naming a pinned realm with
// another key. Kept for the operator to see.
type Conflict struct {
	Realm   protocol.Realm `json:"realm"`
	Pinned  string         `json:"pinned_peer_id"`
	Claimed string         `json:"claimed_peer_id"`
	At      time.Time      `json:"at"`
}

// Directory maps realm names to keys, learned from signed descriptors: the
// first key seen for a name is pinned for good.
type Directory struct {
	st *store.Store

	learn     sync.Mutex // one Learn at a time: the check and the write agree
	mu        sync.RWMutex
	entries   map[protocol.Realm]*DirEntry
	pinned    map[string]bool // the raw descriptor of each entry
	conflicts map[string]Conflict
}

func openDirectory(st *store.Store) (*Directory, error) {
	d := &Directory{st: st, entries: map[protocol.Realm]*DirEntry{}, pinned: map[string]bool{}, conflicts: map[string]Conflict{}}
	err := loadLocal(st, pfxDir, func(_, v []byte) error {
		desc, err := protocol.DecodeDescriptor(v)
		if err != nil {
			return fmt.Errorf("directory: %w", err)
		}
		e, err := entryOf(desc, v)
		if err != nil {
			return err
		}
		d.set(e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = loadLocal(st, pfxConflict, func(k, v []byte) error {
		var c Conflict
		if err := json.Unmarshal(v, &c); err != nil {
			return err
		}
		d.conflicts[string(k)] = c
		return nil
	})
	return d, err
}

func entryOf(desc *protocol.Descriptor, raw []byte) (*DirEntry, error) {
	pk, err := crypto.UnmarshalEd25519PublicKey(desc.Key)
	if err != nil {
		return nil, err
	}
	id, err := peer.IDFromPublicKey(pk)
	if err != nil {
		return nil, err
	}
	return &DirEntry{Realm: protocol.Realm(desc.Realm), Key: ed25519.PublicKey(desc.Key), PeerID: id,
		Addrs: desc.Addrs, At: time.UnixMilli(desc.At).UTC(), raw: raw}, nil
}

// Learn takes a signed descriptor from anywhere: it pins a new name, keeps
// the newest descriptor of a known one, and refuses (and records) another
// key claiming a pinned name.
func (d *Directory) Learn(ctx context.Context, raw []byte) (*DirEntry, error) {
	desc, err := protocol.DecodeDescriptor(raw)
	if err != nil {
		return nil, err
	}
	e, err := entryOf(desc, raw)
	if err != nil {
		return nil, err
	}
	d.learn.Lock()
	defer d.learn.Unlock()
	d.mu.RLock()
	old := d.entries[e.Realm]
	full := len(d.entries) >= MaxRealms
	d.mu.RUnlock()
	switch {
	case old == nil && full:
		return nil, fmt.Errorf("%w: %d realms; %s not taken", ErrDirectoryFull, MaxRealms, e.Realm)
	case old != nil && !bytes.Equal(old.Key, e.Key):
		k := string(e.Realm) + "\x00" + e.PeerID.String()
		d.mu.Lock()
		_, known := d.conflicts[k]
		if !known && len(d.conflicts) >= maxConflicts {
			known = true // enough evidence kept; the claim is refused all the same
		}
		c := Conflict{Realm: e.Realm, Pinned: old.PeerID.String(), Claimed: e.PeerID.String(), At: time.Now().UTC()}
		if !known {
			d.conflicts[k] = c
		}
		d.mu.Unlock()
		if !known {
			if err := putLocal(ctx, d.st, fkey(pfxConflict, string(e.Realm), e.PeerID.String()), c); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("%w: %s is %s, not %s", ErrKeyConflict, e.Realm, old.PeerID, e.PeerID)
	case old != nil && !e.At.After(old.At):
		return old, nil
	}
	if err := putLocal(ctx, d.st, fkey(pfxDir, string(e.Realm)), raw); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.set(e)
	return e, nil
}

// set puts e in the directory, in place of the realm's entry before. Called
// with d.mu held, or before the directory is shared.
func (d *Directory) set(e *DirEntry) {
	if old := d.entries[e.Realm]; old != nil {
		delete(d.pinned, string(old.raw))
	}
	d.entries[e.Realm] = e
	d.pinned[string(e.raw)] = true
}

// Holds reports whether raw is the very descriptor held for its realm, so
// that learning it again would tell nothing: peers send every descriptor
// they know at each exchange of heads.
func (d *Directory) Holds(raw []byte) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.pinned[string(raw)]
}

// Key returns the pinned key of realm.
func (d *Directory) Key(realm protocol.Realm) (ed25519.PublicKey, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e, ok := d.entries[realm]
	if !ok {
		return nil, false
	}
	return e.Key, true
}

// Entry returns what the directory knows of realm.
func (d *Directory) Entry(realm protocol.Realm) (DirEntry, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e, ok := d.entries[realm]
	if !ok {
		return DirEntry{}, false
	}
	return *e, true
}

// RealmOf returns the realm whose key is the peer's.
func (d *Directory) RealmOf(id peer.ID) (protocol.Realm, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, e := range d.entries {
		if e.PeerID == id {
			return e.Realm, true
		}
	}
	return "", false
}

// Entries lists the directory by realm name.
func (d *Directory) Entries() []DirEntry {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]DirEntry, 0, len(d.entries))
	for _, e := range d.entries {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Realm < out[j].Realm })
	return out
}

// raws returns every descriptor held, first's first.
func (d *Directory) raws(first protocol.Realm) [][]byte {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([][]byte, 0, len(d.entries))
	if e, ok := d.entries[first]; ok {
		out = append(out, e.raw)
	}
	for r, e := range d.entries {
		if r != first {
			out = append(out, e.raw)
		}
	}
	return out
}

// Conflicts lists the refused claims.
func (d *Directory) Conflicts() []Conflict {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]Conflict, 0, len(d.conflicts))
	for _, c := range d.conflicts {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// PinnedKeys reads the keys the directory of st has pinned, without
// starting a federation: for tools that work on a stopped node's store.
func PinnedKeys(st *store.Store) (map[protocol.Realm]ed25519.PublicKey, error) {
	pinned, err := PinnedDescriptors(st)
	out := make(map[protocol.Realm]ed25519.PublicKey, len(pinned))
	for r, p := range pinned {
		out[r] = p.Key
	}
	return out, err
}

// PinnedDescriptor is a realm's pinned descriptor: its key, and its signed
// encoding as received.
type PinnedDescriptor struct {
	Key ed25519.PublicKey
	Raw []byte
}

// PinnedDescriptors reads the descriptors the directory of st has pinned,
// by realm, without starting a federation (an export).
func PinnedDescriptors(st *store.Store) (map[protocol.Realm]PinnedDescriptor, error) {
	out := map[protocol.Realm]PinnedDescriptor{}
	err := loadLocal(st, pfxDir, func(_, v []byte) error {
		d, err := protocol.DecodeDescriptor(v)
		if err != nil {
			return fmt.Errorf("directory: %w", err)
		}
		out[protocol.Realm(d.Realm)] = PinnedDescriptor{Key: ed25519.PublicKey(d.Key), Raw: bytes.Clone(v)}
		return nil
	})
	return out, err
}

// Pin pins signed descriptors in the directory of st, a node not running
// (an import), in one write: each must verify and be its realm's, and a
// realm the directory already binds to another key is refused
// (ErrKeyConflict). The node's own realm is never pinned this way.
func Pin(ctx context.Context, st *store.Store, own protocol.Realm, descs map[protocol.Realm][]byte) error {
	_, err := st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		for r, raw := range descs {
			if r == own {
				continue // bound by the node's own key
			}
			d, err := protocol.DecodeDescriptor(raw)
			if err != nil {
				return nil, fmt.Errorf("directory: %s: %w", r, err)
			}
			if protocol.Realm(d.Realm) != r {
				return nil, fmt.Errorf("directory: the descriptor filed under %s is realm %s's", r, d.Realm)
			}
			key := fkey(pfxDir, string(r))
			switch held, err := tx.Get(key); {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return nil, err
			default:
				if h, err := protocol.DecodeDescriptor(held); err == nil && !bytes.Equal(h.Key, d.Key) {
					return nil, fmt.Errorf("%w: realm %s is pinned to another key", ErrKeyConflict, r)
				}
			}
			if err := tx.Set(key, raw); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	return err
}
