package backup

import (
	"bytes"
	"fmt"
	"hash/crc32"

	"relay/protocol"
)

// Magic starts every export file. Like PNG's, its first byte is not ASCII
// and it holds a CR LF and a ^Z, so a transfer that rewrites line endings or
// treats the file as text is caught at once.
const Magic = "\x89RLY\r\n\x1a\n"

// Version is the format version this package writes and reads.
const Version = 1

// Kind is a frame's kind.
type Kind byte

// The frame kinds, in the order a file holds them.
const (
	KindHeader  Kind = 'H'
	KindKey     Kind = 'K'
	KindSecret  Kind = 'S'
	KindEvent   Kind = 'E'
	KindBlob    Kind = 'B'
	KindTrailer Kind = 'Z'
)

// Bounds on what a file may hold; lengths are checked before any
// allocation.
const (
	// MaxBlobSize bounds one blob. Uploads are bounded by the request body
	// (8 MB by default); this leaves room for a node configured higher.
	MaxBlobSize = 32 << 20
	// MaxRealms bounds the realm keys, and so the chains, of one file.
	MaxRealms = 10_000
)

// MaxFrame is the largest payload of each kind.
var MaxFrame = map[Kind]int{
	KindHeader:  4 << 10,
	KindKey:     256 + protocol.MaxDescriptorSize,
	KindSecret:  1 << 10,
	KindEvent:   protocol.MaxEventSize,
	KindBlob:    MaxBlobSize + 1<<10,
	KindTrailer: 2 << 20,
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header describes a file.
type Header struct {
	Origin    string `cbor:"origin"`     // the realm of the node exported
	CreatedAt int64  `cbor:"created_at"` // Unix milliseconds
	Relay     string `cbor:"relay"`      // version of the relay that wrote it
	Events    uint64 `cbor:"events"`     // event frames to come
}

// RealmKey is the public key that verifies one realm's events.
type RealmKey struct {
	Realm  string `cbor:"realm"`
	Public []byte `cbor:"public"` // ed25519, 32 bytes
	// Descriptor is the realm's signed descriptor (protocol.Descriptor) as
	// the exporting node's realm directory pinned it, so that an import
	// pins the same binding; absent for the origin and for keys given by
	// hand.
	Descriptor []byte `cbor:"descriptor,omitempty"`
}

// CheckDescriptor verifies k's descriptor, if any: signed by its own key,
// which must be k's, for k's realm.
func (k *RealmKey) CheckDescriptor() error {
	if len(k.Descriptor) == 0 {
		return nil
	}
	d, err := protocol.DecodeDescriptor(k.Descriptor)
	if err != nil {
		return err
	}
	if d.Realm != k.Realm || !bytes.Equal(d.Key, k.Public) {
		return fmt.Errorf("the descriptor of realm %s names realm %s and another key", k.Realm, d.Realm)
	}
	return nil
}

// Secret is the origin realm's private key, in libp2p's protobuf form (the
// form of realm.key).
type Secret struct {
	Realm string `cbor:"realm"`
	Key   []byte `cbor:"key"`
}

// Blob is one content-addressed blob (an image).
type Blob struct {
	CID       []byte `cbor:"cid"` // CIDv1, raw codec, sha2-256 of Data
	MediaType string `cbor:"media_type"`
	Data      []byte `cbor:"data"`
}

// Trailer closes a file: what it held.
type Trailer struct {
	Events uint64     `cbor:"events"`
	Blobs  uint64     `cbor:"blobs"`
	Heads  []HeadLine `cbor:"heads"` // one per realm, sorted by realm
}

// HeadLine is a realm's newest event in the file.
type HeadLine struct {
	Realm string `cbor:"realm"`
	Seq   uint64 `cbor:"seq"`
	CID   []byte `cbor:"cid"`
}
