package protocol

import (
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
)

// ErrLongVarint is a uvarint written in more bytes than it takes. Lengths
// that frame bytes (gossip runs, stream frames, export frames) must be in
// their shortest form, so that the same bytes have one framing only:
// binary.Uvarint accepts 0x86 0x00 for 6, and a checksum or a signature
// over the framed bytes does not cover their length.
var ErrLongVarint = errors.New("protocol: uvarint in more bytes than it takes")

// UvarintLen is the length of n's shortest uvarint.
func UvarintLen(n uint64) int { return (bits.Len64(n|1) + 6) / 7 }

// ReadUvarint is binary.ReadUvarint that refuses a uvarint not in its
// shortest form (ErrLongVarint).
func ReadUvarint(r io.ByteReader) (uint64, error) {
	c := &countingReader{r: r}
	n, err := binary.ReadUvarint(c)
	if err == nil && c.n != UvarintLen(n) {
		return 0, ErrLongVarint
	}
	return n, err
}

type countingReader struct {
	r io.ByteReader
	n int
}

func (c *countingReader) ReadByte() (byte, error) {
	c.n++
	return c.r.ReadByte()
}
