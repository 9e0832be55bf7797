package backup

import (
	"bytes"
	"context"
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
