package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"
)

func TestReadUvarint(t *testing.T) {
	for _, n := range []uint64{0, 1, 127, 128, 300, 1 << 35, math.MaxUint64} {
		b := binary.AppendUvarint(nil, n)
		if UvarintLen(n) != len(b) {
			t.Errorf("UvarintLen(%d) = %d, want %d", n, UvarintLen(n), len(b))
		}
		if got, err := ReadUvarint(bytes.NewReader(b)); err != nil || got != n {
			t.Errorf("ReadUvarint(% x) = %d, %v", b, got, err)
		}
	}
	for _, tc := range []struct {
		in   []byte
		want error
	}{
		{[]byte{0x86, 0x00}, ErrLongVarint},
		{[]byte{0x80, 0x00}, ErrLongVarint},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, ErrLongVarint},
		{[]byte{0x86}, io.ErrUnexpectedEOF},
		{nil, io.EOF},
	} {
		if _, err := ReadUvarint(bytes.NewReader(tc.in)); !errors.Is(err, tc.want) {
			t.Errorf("ReadUvarint(% x): %v, want %v", tc.in, err, tc.want)
		}
	}
}
