// Package secret is how the node makes and checks the secrets it hands out
// (Parley tokens, corpus agent_ids, OAuth codes and tokens): 256 random bits,
// stored only as a SHA-256 hash and compared in constant time. A secret is
// written "<prefix><id>_<secret>": the id finds the record, the secret is
// checked against the record's hash.
package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// minLength is the shortest secret part Split accepts; New makes 43.
const minLength = 32

// New returns a fresh secret and the hash to store for it.
func New() (s string, hash []byte) {
	var b [32]byte
	rand.Read(b[:]) // never fails: crypto/rand aborts the program instead
	s = base64.RawURLEncoding.EncodeToString(b[:])
	return s, Hash(s)
}

// Hash is the stored form of a secret.
func Hash(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// Equal reports whether two hashes are equal, in constant time. A missing
// record (stored nil) is compared against zeros, so a miss costs what a
// mismatch does and timing tells nothing.
func Equal(hash, stored []byte) bool {
	if stored == nil {
		stored = make([]byte, sha256.Size)
	}
	return subtle.ConstantTimeCompare(hash, stored) == 1
}

// Split parses "<prefix><id>_<secret>"; ok is false for anything else.
func Split(token, prefix string) (id, s string, ok bool) {
	rest, ok := strings.CutPrefix(token, prefix)
	if !ok {
		return "", "", false
	}
	id, s, ok = strings.Cut(rest, "_")
	if !ok || id == "" || len(s) < minLength || len(s) > 128 {
		return "", "", false
	}
	return id, s, true
}
