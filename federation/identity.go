package federation

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"relay/store"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Identity is a realm's key pair in both forms relay needs: the libp2p key
// for the host and the raw ed25519 key that signs events.
type Identity struct {
	PrivKey crypto.PrivKey
	Signing ed25519.PrivateKey
	PeerID  peer.ID
}

// Public returns the key that verifies the realm's events.
func (id *Identity) Public() ed25519.PublicKey { return id.Signing.Public().(ed25519.PublicKey) }

// LoadOrCreateIdentity reads the realm key at path (libp2p's protobuf form),
// or creates it with mode 0600 when the file does not exist. The boolean
// reports whether it was created.
func LoadOrCreateIdentity(path string) (*Identity, bool, error) {
	id, err := LoadIdentity(path)
	switch {
	case err == nil:
		return id, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, false, err
	}
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, false, err
	}
	if id, err = identityOf(k); err != nil {
		return nil, false, err
	}
	if err := SaveIdentity(path, id); err != nil {
		return nil, false, err
	}
	return id, true, nil
}

// LoadIdentity reads the realm key at path; a missing file is an error
// satisfying errors.Is(err, fs.ErrNotExist).
func LoadIdentity(path string) (*Identity, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	id, err := ParseIdentity(b)
	if err != nil {
		return nil, fmt.Errorf("realm key %s: %w", path, err)
	}
	return id, nil
}

// ParseIdentity decodes a realm key in libp2p's protobuf form, the form of
// realm.key and of the secret in an export.
func ParseIdentity(b []byte) (*Identity, error) {
	k, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNotAKey, err)
	}
	return identityOf(k)
}

// ErrNotAKey is a realm key file that does not hold a key at all.
var ErrNotAKey = errors.New("not a key as relay writes one (realm.key holds a libp2p private key)")

// Marshal encodes the key in libp2p's protobuf form.
func (id *Identity) Marshal() ([]byte, error) { return crypto.MarshalPrivateKey(id.PrivKey) }

// SaveIdentity writes the key to path with mode 0600, atomically.
func SaveIdentity(path string, id *Identity) error {
	b, err := id.Marshal()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return store.WriteFile(path, b, 0o600)
}

// IdentityFromSeed derives an identity from a 32-byte seed; for tests and
// reproducible testnets.
func IdentityFromSeed(seed []byte) (*Identity, error) {
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return nil, err
	}
	return identityOf(k)
}

func identityOf(k crypto.PrivKey) (*Identity, error) {
	if k.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("realm key: want ed25519, have %v", k.Type())
	}
	raw, err := k.Raw()
	if err != nil {
		return nil, err
	}
	if len(raw) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("realm key: %d bytes", len(raw))
	}
	pid, err := peer.IDFromPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return &Identity{PrivKey: k, Signing: ed25519.PrivateKey(raw), PeerID: pid}, nil
}
