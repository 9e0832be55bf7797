package federation

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"relay/protocol"
)

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	for _, f := range [][]byte{[]byte("one"), {}, bytes.Repeat([]byte{7}, 300)} {
		if err := writeFrame(w, f); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	r := bufio.NewReader(bytes.NewReader(buf.Bytes()))
	for _, want := range []int{3, 0, 300} {
		b, err := readFrame(r, 1000)
		if err != nil || len(b) != want {
			t.Fatalf("frame %d: %d %v", want, len(b), err)
		}
	}
	// A length beyond the bound is refused before allocating it.
	buf.Reset()
	w.Reset(&buf)
	writeFrame(w, make([]byte, 2000))
	w.Flush()
	if _, err := readFrame(bufio.NewReader(&buf), 1000); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("oversized frame: %v", err)
	}
	// A length in more bytes than it takes frames the same bytes another
	// way: refused.
	for _, raw := range [][]byte{{0x83, 0x00, 'a', 'b', 'c'}, {0x80, 0x00}, {0x80, 0x80, 0x00}} {
		if _, err := readFrame(bufio.NewReader(bytes.NewReader(raw)), 1000); !errors.Is(err, protocol.ErrLongVarint) {
			t.Errorf("frame % x: %v, want ErrLongVarint", raw, err)
		}
	}
}

func TestDecodeRequest(t *testing.T) {
	good := []request{{Op: opHeads}, {Op: opRange, Realm: "a", From: 1, Limit: 10}}
	for _, q := range good {
		b, _ := encodeWire(&q)
		if _, err := decodeRequest(b); err != nil {
			t.Errorf("%+v: %v", q, err)
		}
	}
	bad := []request{{Op: "drop"}, {Op: opRange, Realm: "Bad!", From: 1}, {Op: opRange, Realm: "a"}, {Op: opBlob, CID: []byte{1, 2}}}
	for _, q := range bad {
		b, _ := encodeWire(&q)
		if _, err := decodeRequest(b); err == nil {
			t.Errorf("%+v accepted", q)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	b, _ := encodeWire(&request{Op: opRange, Realm: "a", From: 3, Limit: 5})
	f.Add(b)
	f.Fuzz(func(t *testing.T, raw []byte) {
		q, err := decodeRequest(raw)
		if err == nil && (q.Limit < 0 || q.Limit > maxRangeEvents) {
			t.Fatalf("limit %d let through", q.Limit)
		}
	})
}

func FuzzDecodeHeads(f *testing.F) {
	b, _ := encodeWire(&headsAnswer{Heads: []wireHead{{Realm: "a", Seq: 0}}, Descriptors: [][]byte{}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, raw []byte) {
		decodeHeads(raw)
	})
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{3, 'a', 'b', 'c'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := bufio.NewReader(bytes.NewReader(raw))
		var again bytes.Buffer
		w := bufio.NewWriter(&again)
		for {
			b, err := readFrame(r, 1<<10)
			if err != nil {
				break
			}
			if len(b) > 1<<10 {
				t.Fatal("frame over the bound")
			}
			writeFrame(w, b)
		}
		w.Flush()
		// What was read is written back the same way: one framing only.
		if !bytes.HasPrefix(raw, again.Bytes()) {
			t.Fatalf("frames read from % x write back as % x", raw, again.Bytes())
		}
	})
}
