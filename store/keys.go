package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// Key prefixes; doc.go describes the layout.
var (
	prefixEvent        = []byte("e/v/")
	prefixEventByCID   = []byte("e/i/")
	prefixHead         = []byte("e/h/")
	prefixSequence     = []byte("e/n/")
	prefixID           = []byte("m/id/")
	prefixEquivocation = []byte("x/eq/")

	keySchema     = []byte("m/schema")
	keySequence   = []byte("m/seq")
	keyRebuilding = []byte("m/rebuilding")
	keyProjection = []byte("m/projections")
	// keyWALMark is the number of the last write-ahead record whose
	// writes Badger holds: written with each record's own writes (wal.go).
	keyWALMark = []byte("m/wal")

	// reserved are the prefixes only the store itself writes.
	reserved = [][]byte{[]byte("e/"), []byte("m/"), []byte("x/")}
	// prefixProjection is where every projector's prefixes must live, so that
	// Rebuild can never delete the log.
	prefixProjection = []byte("p/")
)

func isReserved(key []byte) bool {
	for _, p := range reserved {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

func join(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func cidKey(c cid.Cid) []byte { return join(prefixEventByCID, c.Bytes()) }

// realmSeqPrefix ends in a NUL so that realm "a" is not a prefix of realm
// "ab"; realm names never contain one.
func realmSeqPrefix(realm string) []byte { return join(prefixEvent, []byte(realm), []byte{0}) }

// eventKey is where the realm's event at seq is stored.
func eventKey(realm string, seq uint64) []byte { return join(realmSeqPrefix(realm), u64(seq)) }

// An event's place, realm NUL seq, is what the CID and arrival-order indexes
// hold: its key without the prefix.
func eventPlace(key []byte) []byte { return key[len(prefixEvent):] }

func placeKey(place []byte) []byte { return join(prefixEvent, place) }

func headKey(realm string) []byte { return join(prefixHead, []byte(realm)) }

func sequenceKey(n uint64) []byte { return join(prefixSequence, u64(n)) }

func idKey(name string) []byte { return join(prefixID, []byte(name)) }

func equivocationKey(realm string, seq uint64, c cid.Cid) []byte {
	return join(prefixEquivocation, []byte(realm), []byte{0}, u64(seq), c.Bytes())
}

// An event record (e/v/) is the node sequence, the CID's length in one byte,
// the CID and the raw signed event, so that one read, or one scan of a
// realm's chain, yields all of them.
func encodeEventRecord(seq uint64, c []byte, raw []byte) []byte {
	return join(u64(seq), []byte{byte(len(c))}, c, raw)
}

// splitEventRecord returns an event record's parts without copying.
func splitEventRecord(v []byte) (seq uint64, c, raw []byte, err error) {
	if len(v) < 9 || len(v) < 9+int(v[8]) {
		return 0, nil, nil, errors.New("store: corrupt event record")
	}
	n := 9 + int(v[8])
	return binary.BigEndian.Uint64(v), v[9:n], v[n:], nil
}

// decodeEventRecord decodes an event record, which it keeps.
func decodeEventRecord(v []byte) (*StoredEvent, error) {
	seq, cb, raw, err := splitEventRecord(v)
	if err != nil {
		return nil, err
	}
	c, err := cid.Cast(cb)
	if err != nil {
		return nil, fmt.Errorf("store: corrupt event record: %w", err)
	}
	var ev protocol.Event
	// Stored bytes were checked on the way in; a strict decode is enough.
	if err := protocol.UnmarshalStrict(raw, &ev); err != nil {
		return nil, fmt.Errorf("store: corrupt event %s: %w", c, err)
	}
	return &StoredEvent{Event: &ev, CID: c, Raw: raw, Sequence: seq}, nil
}

func encodeHead(h protocol.Head) []byte { return join(u64(h.Seq), h.CID.Bytes()) }

func decodeHead(v []byte) (protocol.Head, error) {
	if len(v) < 8 {
		return protocol.Head{}, fmt.Errorf("store: corrupt head")
	}
	c, err := cid.Cast(v[8:])
	if err != nil {
		return protocol.Head{}, fmt.Errorf("store: corrupt head: %w", err)
	}
	return protocol.Head{Seq: binary.BigEndian.Uint64(v), CID: c}, nil
}

func decodeU64(v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("store: corrupt counter")
	}
	return binary.BigEndian.Uint64(v), nil
}

// successor returns the smallest key greater than every key with prefix p,
// or nil when there is none (p empty or all 0xff).
func successor(p []byte) []byte {
	s := bytes.Clone(p)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] < 0xff {
			s[i]++
			return s[:i+1]
		}
	}
	return nil
}
