package backup

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"relay/protocol"
	"relay/store"
)

// FuzzRead feeds arbitrary bytes to the whole reading path, framing to
// chains and signatures: an export file is untrusted input. It must never
// panic nor allocate past the frame bounds, and what it accepts must hold
// together.
func FuzzRead(f *testing.F) {
	fx := newFixture(f, 2, 1)
	f.Add(fx.write(f, false))
	f.Add(fx.write(f, true))
	home, homeH := chain(f, "home", testKey(1), 2)
	f.Add(newRawFile(f, Header{Origin: "home", Events: 2}).cbor(f, KindKey, &RealmKey{Realm: "home", Public: pubOf(testKey(1))}).
		frame(KindEvent, home[0]).frame(KindEvent, home[1]).cbor(f, KindTrailer, trailerFor(2, 0, homeH)).b)
	f.Add([]byte(Magic))
	f.Add(append([]byte(Magic), Version, byte(KindEvent), 0xff, 0xff, 0xff, 0xff, 0x0f))
	f.Fuzz(func(t *testing.T, data []byte) {
		var events uint64
		sum, err := Read(context.Background(), bytes.NewReader(data), Options{Workers: 2, ChunkEvents: 2}, Sink{
			Events: func(evs []store.Checked) error {
				for _, e := range evs {
					if protocol.CIDOf(e.Raw) != e.CID {
						t.Fatalf("event handed on with cid %s, bytes hash to %s", e.CID, protocol.CIDOf(e.Raw))
					}
				}
				events += uint64(len(evs))
				return nil
			},
		})
		if err != nil {
			if !isFileError(err) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if sum.Events != events || sum.Events != sum.Header.Events {
			t.Fatalf("accepted %d events, handed on %d, header says %d", sum.Events, events, sum.Header.Events)
		}
		var total uint64
		for _, h := range sum.Heads {
			total += h.Seq
		}
		if total != sum.Events {
			t.Fatalf("heads add up to %d events, read %d", total, sum.Events)
		}
	})
}

// FuzzFrames fuzzes past the checksums: its input is a file without them
// (kind, uvarint length, payload …), to which it adds the magic, the version
// and a correct CRC per frame, so that the fuzzer explores the payloads'
// decoding, the order of frames and the chains rather than CRC mismatches.
func FuzzFrames(f *testing.F) {
	fx := newFixture(f, 2, 1)
	f.Add(stripCRCs(f, fx.write(f, false)))
	f.Fuzz(func(t *testing.T, data []byte) {
		file := append([]byte(Magic), Version)
		for len(data) > 0 {
			k := Kind(data[0])
			n, w := binary.Uvarint(data[1:])
			if w <= 0 || n > uint64(len(data)-1-w) {
				break
			}
			payload := data[1+w : 1+w+int(n)]
			data = data[1+w+int(n):]
			file = append(file, (&rawFile{}).frame(k, payload).b...)
		}
		if _, err := Read(context.Background(), bytes.NewReader(file), Options{Workers: 2, ChunkEvents: 2}, Sink{}); err != nil && !isFileError(err) {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}

// stripCRCs turns an uncompressed export into FuzzFrames' input.
func stripCRCs(t testing.TB, file []byte) []byte {
	var out []byte
	b := file[len(Magic)+1:]
	for len(b) > 0 {
		n, w := binary.Uvarint(b[1:])
		out = append(out, b[:1+w+int(n)]...)
		b = b[1+w+int(n)+4:]
	}
	return out
}
