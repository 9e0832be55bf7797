package protocol

import (
	"fmt"
	"slices"
	"strings"
)

// Right is a permission a token may hold. Reading needs no right.
type Right string

// The rights of Parley v1.
const (
	RightRead   Right = "read"
	RightWrite  Right = "write"
	RightPin    Right = "pin"
	RightLock   Right = "lock"
	RightVerify Right = "verify"
	RightGrant  Right = "grant"
)

// AllRights lists every right in canonical order.
var AllRights = []Right{RightRead, RightWrite, RightPin, RightLock, RightVerify, RightGrant}

// Rights is a set of rights, kept sorted in canonical order and always
// including read.
type Rights []Right

// ParseRights parses a comma-separated list ("write,pin"); read is implied.
func ParseRights(s string) (Rights, error) {
	var parts []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	return NewRights(parts...)
}

// NewRights builds a rights set from names; read is implied.
func NewRights(names ...string) (Rights, error) {
	set := map[Right]bool{RightRead: true}
	for _, n := range names {
		r := Right(strings.ToLower(n))
		if !slices.Contains(AllRights, r) {
			return nil, fmt.Errorf("%w: unknown right %q (want one of read, write, pin, lock, verify, grant)", ErrInvalidName, n)
		}
		set[r] = true
	}
	var out Rights
	for _, r := range AllRights {
		if set[r] {
			out = append(out, r)
		}
	}
	return out, nil
}

// Has reports whether the set holds r. Everyone may read.
func (rs Rights) Has(r Right) bool { return r == RightRead || slices.Contains(rs, r) }

func (rs Rights) String() string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}
