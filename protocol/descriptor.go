package protocol

import (
	"crypto/ed25519"
	"errors"
	"fmt"
)

// Descriptor is a realm's signed statement of its name, its key and where
// it listens. Realms learn each other's keys from descriptors: the first key
// a name is seen with is pinned (the realm directory).
type Descriptor struct {
	Realm string   `cbor:"realm"`
	Key   []byte   `cbor:"key"`   // the realm's ed25519 public key
	Addrs []string `cbor:"addrs"` // libp2p multiaddrs, as text
	At    int64    `cbor:"at"`    // Unix milliseconds
	Sig   []byte   `cbor:"sig,omitempty"`
}

// MaxDescriptorSize bounds an encoded descriptor.
const MaxDescriptorSize = 4 << 10

// maxDescriptorAddrs bounds the addresses a descriptor may list.
const maxDescriptorAddrs = 16

// ErrBadDescriptor is returned for a descriptor that is malformed or whose
// signature does not verify under its own key.
var ErrBadDescriptor = errors.New("protocol: bad realm descriptor")

// SignDescriptor fills in d's key and signature and returns its encoding.
func SignDescriptor(d *Descriptor, key ed25519.PrivateKey) ([]byte, error) {
	d.Key = key.Public().(ed25519.PublicKey)
	d.Sig = nil
	if err := d.check(); err != nil {
		return nil, err
	}
	msg, err := encMode.Marshal(d)
	if err != nil {
		return nil, err
	}
	d.Sig = ed25519.Sign(key, msg)
	return encMode.Marshal(d)
}

// DecodeDescriptor decodes a descriptor from an untrusted source and checks
// that it is well formed and signed by the key it names. It says nothing of
// whether that key is the one the directory has pinned for the name.
func DecodeDescriptor(b []byte) (*Descriptor, error) {
	if len(b) > MaxDescriptorSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadDescriptor, len(b))
	}
	var d Descriptor
	if err := decMode.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDescriptor, err)
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	if len(d.Sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: signature length", ErrBadDescriptor)
	}
	u := d
	u.Sig = nil
	msg, err := encMode.Marshal(&u)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDescriptor, err)
	}
	if !ed25519.Verify(ed25519.PublicKey(d.Key), msg, d.Sig) {
		return nil, fmt.Errorf("%w: signature", ErrBadDescriptor)
	}
	return &d, nil
}

func (d *Descriptor) check() error {
	if _, err := ParseRealm(d.Realm); err != nil {
		return fmt.Errorf("%w: %v", ErrBadDescriptor, err)
	}
	if len(d.Key) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: key length", ErrBadDescriptor)
	}
	if len(d.Addrs) > maxDescriptorAddrs {
		return fmt.Errorf("%w: more than %d addresses", ErrBadDescriptor, maxDescriptorAddrs)
	}
	for _, a := range d.Addrs {
		if len(a) == 0 || len(a) > 256 {
			return fmt.Errorf("%w: address length", ErrBadDescriptor)
		}
	}
	return nil
}
