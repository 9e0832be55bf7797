package protocol

import (
	"encoding/base32"

	"github.com/ipfs/go-cid"
)

// lowerBase32 is multibase's base32 ("b"): RFC 4648, lower case, unpadded.
var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// CIDString writes c as c.String() does: base32 with multibase's "b" for a
// CIDv1, base58 for a CIDv0. The forum's projector writes the CID of every
// event it folds, on the committer; a CIDv1 of up to 79 bytes (every CID
// relay makes) is written here in one allocation, where c.String() takes
// three and about twice the time.
func CIDString(c cid.Cid) string {
	ks := c.KeyString()
	if c.Version() == 0 || len(ks) > 79 {
		return c.String()
	}
	var src [79]byte
	var buf [128]byte
	b := append(buf[:0], 'b')
	return string(lowerBase32.AppendEncode(b, append(src[:0], ks...)))
}
