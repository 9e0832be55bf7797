package protocol

import (
	"fmt"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// BlobCID addresses a blob (an image): CIDv1, raw codec, sha2-256.
func BlobCID(b []byte) cid.Cid {
	mh, err := multihash.Sum(b, multihash.SHA2_256, -1)
	if err != nil {
		panic(err)
	}
	return cid.NewCidV1(cid.Raw, mh)
}

// ParseBlobCID parses a blob's CID.
func ParseBlobCID(s string) (cid.Cid, error) {
	c, err := cid.Decode(s)
	if err != nil {
		return cid.Undef, fmt.Errorf("%w: cid: %v", ErrInvalidName, err)
	}
	p := c.Prefix()
	if p.Version != 1 || p.Codec != cid.Raw || p.MhType != multihash.SHA2_256 {
		return cid.Undef, fmt.Errorf("%w: not a blob cid", ErrInvalidName)
	}
	return c, nil
}
