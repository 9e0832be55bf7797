package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// Key prefixes; doc.go describes the layout.
var (
	prefixEventByCID   = []byte("e/c/")
	prefixRealmSeq     = []byte("e/r/")
	prefixHead         = []byte("e/h/")
	prefixSequence     = []byte("e/s/")
	prefixID           = []byte("m/id/")
	prefixEquivocation = []byte("x/eq/")

	keySchema     = []byte("m/schema")
	keySequence   = []byte("m/seq")
	keyRebuilding = []byte("m/rebuilding")

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

func eventKey(c cid.Cid) []byte { return join(prefixEventByCID, c.Bytes()) }

// realmSeqPrefix ends in a NUL so that realm "a" is not a prefix of realm
// "ab"; realm names never contain one.
func realmSeqPrefix(realm string) []byte { return join(prefixRealmSeq, []byte(realm), []byte{0}) }

func realmSeqKey(realm string, seq uint64) []byte { return join(realmSeqPrefix(realm), u64(seq)) }

func headKey(realm string) []byte { return join(prefixHead, []byte(realm)) }

func sequenceKey(n uint64) []byte { return join(prefixSequence, u64(n)) }

func idKey(name string) []byte { return join(prefixID, []byte(name)) }

func equivocationKey(realm string, seq uint64, c cid.Cid) []byte {
	return join(prefixEquivocation, []byte(realm), []byte{0}, u64(seq), c.Bytes())
}

// An e/c/ value is the node sequence followed by the raw event, so one read
// yields both.
func encodeEventValue(seq uint64, raw []byte) []byte { return join(u64(seq), raw) }

func decodeEventValue(c cid.Cid, v []byte) (*StoredEvent, error) {
	if len(v) < 8 {
		return nil, fmt.Errorf("store: corrupt event record %s", c)
	}
	raw := v[8:]
	var ev protocol.Event
	// Stored bytes were checked on the way in; a strict decode is enough.
	if err := protocol.UnmarshalStrict(raw, &ev); err != nil {
		return nil, fmt.Errorf("store: corrupt event %s: %w", c, err)
	}
	return &StoredEvent{Event: &ev, CID: c, Raw: raw, Sequence: binary.BigEndian.Uint64(v)}, nil
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
