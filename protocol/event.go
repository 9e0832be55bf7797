package protocol

import (
	"crypto/ed25519"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Event is one signed change authored by one realm. Field names are the wire
// names; the canonical encoding sorts them length-first.
type Event struct {
	Realm  string          `cbor:"realm"`
	Seq    uint64          `cbor:"seq"`
	Prev   Link            `cbor:"prev"` // undefined (null) only for seq 1
	Type   string          `cbor:"type"`
	At     int64           `cbor:"at"` // Unix milliseconds, set by the author realm
	Author string          `cbor:"author"`
	Data   cbor.RawMessage `cbor:"data"`
	Sig    []byte          `cbor:"sig,omitempty"`
}

// Draft is what an author hands to its realm: everything but the chain
// position, the time and the signature, which the realm assigns.
type Draft struct {
	Type   string
	Author string
	Data   cbor.RawMessage
}

// Head is the newest event a node holds of one realm.
type Head struct {
	Seq uint64
	CID cid.Cid
}

// Time returns the event's timestamp.
func (e *Event) Time() time.Time { return time.UnixMilli(e.At).UTC() }

// validate checks the fields every event must have, before encoding or after
// decoding.
func (e *Event) validate() error {
	if _, err := ParseRealm(e.Realm); err != nil {
		return fmt.Errorf("%w: realm: %v", ErrInvalidEvent, err)
	}
	switch {
	case e.Seq == 0:
		return fmt.Errorf("%w: seq 0", ErrInvalidEvent)
	case e.Seq == 1 && e.Prev.Defined():
		return fmt.Errorf("%w: seq 1 with prev", ErrInvalidEvent)
	case e.Seq > 1 && !e.Prev.Defined():
		return fmt.Errorf("%w: seq %d without prev", ErrInvalidEvent, e.Seq)
	// Type and Author are checked for UTF-8 because the encoder does not:
	// Sign would sign a text string that every DecodeEvent refuses.
	case e.Type == "" || len(e.Type) > 64 || !utf8.ValidString(e.Type):
		return fmt.Errorf("%w: type", ErrInvalidEvent)
	case len(e.Author) > 200 || !utf8.ValidString(e.Author):
		return fmt.Errorf("%w: author", ErrInvalidEvent)
	case len(e.Data) == 0 || e.Data[0]>>5 != 5:
		return fmt.Errorf("%w: data must be a map", ErrInvalidEvent)
	}
	if e.Prev.Defined() {
		if err := checkCIDShape(e.Prev.Cid); err != nil {
			return fmt.Errorf("%w: prev: %v", ErrInvalidEvent, err)
		}
	}
	return nil
}

// checkCIDShape accepts only the CIDs relay makes: v1, dag-cbor, sha2-256.
func checkCIDShape(c cid.Cid) error {
	p := c.Prefix()
	if p.Version != 1 || p.Codec != cid.DagCBOR || p.MhType != multihash.SHA2_256 || p.MhLength != 32 {
		return fmt.Errorf("unsupported cid %s", c)
	}
	return nil
}

// SigningBytes returns the canonical encoding of the event without its
// signature: the bytes the realm key signs.
func (e *Event) SigningBytes() ([]byte, error) {
	u := *e
	u.Sig = nil
	return encMode.Marshal(&u)
}

// Sign sets the event's signature with the realm key and returns its
// canonical encoding and CID.
func (e *Event) Sign(key ed25519.PrivateKey) ([]byte, cid.Cid, error) {
	if err := e.validate(); err != nil {
		return nil, cid.Undef, err
	}
	if err := CheckCanonical(e.Data); err != nil {
		return nil, cid.Undef, fmt.Errorf("data: %w", err)
	}
	msg, err := e.SigningBytes()
	if err != nil {
		return nil, cid.Undef, err
	}
	e.Sig = voi.Sign(voi.PrivateKey(key), msg)
	b := withSig(msg, e.Sig)
	if b == nil {
		if b, err = encMode.Marshal(e); err != nil {
			return nil, cid.Undef, err
		}
	}
	if len(b) > MaxEventSize {
		return nil, cid.Undef, ErrEventTooLarge
	}
	return b, CIDOf(b), nil
}

// withSig returns the canonical encoding of an event with signature sig,
// made from msg, its canonical encoding without one (SigningBytes), or nil
// when msg is not shaped as expected. Canonical keys sort length-first, so
// "sig" comes right after "at" and "seq": the signed encoding is msg with
// the map one entry longer and that entry spliced in after "seq". It spares
// Sign a second encoding of the whole event.
func withSig(msg, sig []byte) []byte {
	const entries = 7 // every field but sig; Prev is encoded even when null
	if len(msg) < 1 || msg[0] != 0xa0|entries || len(sig) != ed25519.SignatureSize {
		return nil
	}
	off := 1
	for _, k := range []string{"at", "seq"} {
		if len(msg) < off+1+len(k) || msg[off] != 0x60|byte(len(k)) || string(msg[off+1:off+1+len(k)]) != k {
			return nil
		}
		off += 1 + len(k)
		n := intSize(msg[off:])
		if n == 0 {
			return nil
		}
		off += n
	}
	b := make([]byte, 0, len(msg)+6+len(sig))
	b = append(b, 0xa0|(entries+1))
	b = append(b, msg[1:off]...)
	b = append(b, 0x63, 's', 'i', 'g', 0x58, byte(len(sig)))
	b = append(b, sig...)
	return append(b, msg[off:]...)
}

// intSize is the length of the CBOR integer at the start of b, or 0 when b
// does not start with one.
func intSize(b []byte) int {
	if len(b) == 0 || b[0]>>5 > 1 {
		return 0
	}
	n := 0
	switch info := b[0] & 0x1f; {
	case info < 24:
		n = 1
	case info == 24:
		n = 2
	case info == 25:
		n = 3
	case info == 26:
		n = 5
	case info == 27:
		n = 9
	default:
		return 0
	}
	if len(b) < n {
		return 0
	}
	return n
}

// Verify checks the event's signature against the realm's public key.
func (e *Event) Verify(pub ed25519.PublicKey) error {
	if len(e.Sig) != ed25519.SignatureSize || len(pub) != ed25519.PublicKeySize {
		return ErrBadSignature
	}
	msg, err := e.SigningBytes()
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, msg, e.Sig) {
		return ErrBadSignature
	}
	return nil
}

// Follows reports whether e extends the chain whose newest event is h (the
// zero Head for a realm of which nothing is held yet).
func (e *Event) Follows(h Head) error {
	if e.Seq != h.Seq+1 {
		return fmt.Errorf("%w: seq %d after %d", ErrChainBroken, e.Seq, h.Seq)
	}
	if h.Seq == 0 {
		return nil // validate already insists that seq 1 has no prev
	}
	if !e.Prev.Defined() || !e.Prev.Cid.Equals(h.CID) {
		return fmt.Errorf("%w: prev does not match head %d", ErrChainBroken, h.Seq)
	}
	return nil
}

// CIDOf returns the content address of an encoded event.
func CIDOf(b []byte) cid.Cid {
	mh, err := multihash.Sum(b, multihash.SHA2_256, -1)
	if err != nil {
		panic(err) // sha2-256 is always registered
	}
	return cid.NewCidV1(cid.DagCBOR, mh)
}

// DecodeEvent decodes and checks one encoded, signed event from an untrusted
// source. It checks the encoding is canonical, the fields are well formed and
// a signature is present; it does not verify the signature (the caller knows
// the key) nor the chain.
func DecodeEvent(b []byte) (*Event, cid.Cid, error) {
	if len(b) > MaxEventSize {
		return nil, cid.Undef, ErrEventTooLarge
	}
	var e Event
	if err := eventDecMode.Unmarshal(b, &e); err != nil {
		return nil, cid.Undef, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if err := e.validate(); err != nil {
		return nil, cid.Undef, err
	}
	if len(e.Sig) != ed25519.SignatureSize {
		return nil, cid.Undef, fmt.Errorf("%w: signature length", ErrInvalidEvent)
	}
	if err := CheckCanonical(e.Data); err != nil {
		return nil, cid.Undef, fmt.Errorf("data: %w", err)
	}
	again, err := encMode.Marshal(&e)
	if err != nil {
		return nil, cid.Undef, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if string(again) != string(b) {
		return nil, cid.Undef, ErrNonCanonical
	}
	return &e, CIDOf(b), nil
}

// ParseCID parses a CID as relay makes them (v1, dag-cbor, sha2-256).
func ParseCID(s string) (cid.Cid, error) {
	c, err := cid.Decode(s)
	if err != nil {
		return cid.Undef, fmt.Errorf("%w: cid: %v", ErrInvalidName, err)
	}
	if err := checkCIDShape(c); err != nil {
		return cid.Undef, fmt.Errorf("%w: %v", ErrInvalidName, err)
	}
	return c, nil
}
