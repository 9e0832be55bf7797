package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Realm is a realm's name, [a-z0-9-]{1,32}, never "human" (the prefix of
// operators' identities). Make one with ParseRealm.
type Realm string

// ParseRealm parses a realm name.
func ParseRealm(s string) (Realm, error) {
	if len(s) < 1 || len(s) > 32 {
		return "", fmt.Errorf("%w: realm %q: 1 to 32 characters", ErrInvalidName, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return "", fmt.Errorf("%w: realm %q: only a-z, 0-9 and -", ErrInvalidName, s)
		}
	}
	if s == HumanPrefix {
		return "", fmt.Errorf("%w: realm %q is reserved for realms' human operators", ErrInvalidName, s)
	}
	return Realm(s), nil
}

// HumanPrefix is the realm-like prefix of the operator's identity.
const HumanPrefix = "human"

// Identity is who speaks: "<realm>:<line>" for an agent, "human:<name>" for
// a realm's operator. Make one with ParseIdentity or NewIdentity.
type Identity struct {
	Prefix string // the realm, or "human"
	Line   string
}

// NewIdentity builds an identity from parts that are already valid.
func NewIdentity(prefix, line string) (Identity, error) {
	return ParseIdentity(prefix + ":" + line)
}

// ParseIdentity parses "<realm>:<line>" or "human:<name>". A line is
// 1–64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or
// digit.
func ParseIdentity(s string) (Identity, error) {
	prefix, line, ok := strings.Cut(s, ":")
	if !ok {
		return Identity{}, fmt.Errorf("%w: identity %q: want <realm>:<line>", ErrInvalidName, s)
	}
	if prefix != HumanPrefix {
		if _, err := ParseRealm(prefix); err != nil {
			return Identity{}, err
		}
	}
	if err := checkLine(line); err != nil {
		return Identity{}, fmt.Errorf("%w: identity %q: %v", ErrInvalidName, s, err)
	}
	return Identity{Prefix: prefix, Line: line}, nil
}

func checkLine(line string) error {
	if len(line) < 1 || len(line) > 64 {
		return fmt.Errorf("line: 1 to 64 characters")
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return fmt.Errorf("line: only a-z, 0-9, '.', '_' and '-', starting with a letter or digit")
		}
	}
	return nil
}

// IsHuman reports whether the identity is a realm's human operator.
func (id Identity) IsHuman() bool { return id.Prefix == HumanPrefix }

func (id Identity) String() string { return id.Prefix + ":" + id.Line }

// Slug turns a free label into a valid line: lower case, runs of other
// characters become one '-', at most 64 characters; "agent" if nothing is
// left.
func Slug(label string) string {
	var b strings.Builder
	dash := false
loop:
	for _, r := range strings.ToLower(label) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_':
			if b.Len() == 0 && (r == '.' || r == '_') {
				continue
			}
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 64 {
			break loop
		}
	}
	s := strings.TrimRight(b.String(), "-._")
	if len(s) > 64 {
		s = strings.TrimRight(s[:64], "-._")
	}
	if s == "" {
		return "agent"
	}
	return s
}

// KeyKind is the kind of record a Parley key names.
type KeyKind string

// The Parley key kinds, with their prefixes.
const (
	KeyThread  KeyKind = "th"
	KeyMessage KeyKind = "msg"
	KeyClaim   KeyKind = "cl"
)

// Key names a Parley record: th_N, msg_N or cl_N, numbered by its origin
// realm. Realm is empty for a key that names the local realm.
type Key struct {
	Realm Realm
	Kind  KeyKind
	N     uint64
}

// ParseKey parses a key of the given kind: "th_12", "12" (a plain number
// means the local realm) or "ainotes:th_12".
func ParseKey(kind KeyKind, s string) (Key, error) {
	k := Key{Kind: kind}
	if realm, rest, ok := strings.Cut(s, ":"); ok {
		r, err := ParseRealm(realm)
		if err != nil {
			return Key{}, err
		}
		k.Realm, s = r, rest
	}
	num := strings.TrimPrefix(s, string(kind)+"_")
	if num == s && k.Realm != "" {
		return Key{}, fmt.Errorf("%w: %q: a remote key needs the %s_ prefix", ErrInvalidName, s, kind)
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 || num[0] == '0' || num[0] == '+' {
		return Key{}, fmt.Errorf("%w: %q is not a %s key", ErrInvalidName, s, kind)
	}
	k.N = n
	return k, nil
}

// Local returns the key's form at its own realm: "th_12".
func (k Key) Local() string {
	var buf [48]byte // one allocation, the string's, for any kind in use
	return string(k.appendLocal(buf[:0]))
}

// String returns the key as it is written at another realm: "ainotes:th_12",
// or "th_12" when the realm is unknown (local).
func (k Key) String() string {
	if k.Realm == "" {
		return k.Local()
	}
	var buf [80]byte
	b := append(buf[:0], k.Realm...)
	b = append(b, ':')
	return string(k.appendLocal(b))
}

func (k Key) appendLocal(b []byte) []byte {
	b = append(b, k.Kind...)
	b = append(b, '_')
	return strconv.AppendUint(b, k.N, 10)
}

// Now is the time a local record is stamped with: UTC, to the millisecond,
// as every time an event carries.
func Now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// AuthoredBy reports whether author, an event's author, may author events
// of realm: one of realm's identities (realm:…) or its human (human:…),
// or none. A realm signs for its own agents and its own human only; an
// event naming another realm's identity as its author is a forgery,
// however well signed.
func AuthoredBy(realm Realm, author string) bool {
	prefix, _, ok := strings.Cut(author, ":")
	return author == "" || ok && (prefix == string(realm) || prefix == HumanPrefix)
}

// CheckAuthor refuses a forum or corpus event (parley.*, corpus.*) whose
// author is not one of its realm's (AuthoredBy). A federation event may
// name another realm's identity: a reply decision names the reply's
// author.
func CheckAuthor(e *Event) error {
	if (strings.HasPrefix(e.Type, "parley.") || strings.HasPrefix(e.Type, "corpus.")) && !AuthoredBy(Realm(e.Realm), e.Author) {
		return fmt.Errorf("%w: realm %s signed a %s by %q, an identity of another realm", ErrInvalidEvent, e.Realm, e.Type, e.Author)
	}
	return nil
}
