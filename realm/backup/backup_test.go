package backup

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"

	"relay/protocol"
	"relay/store"
)

func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func pubOf(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// chain returns n signed events of realm, raw, and the head they reach.
func chain(t testing.TB, realm string, key ed25519.PrivateKey, n int) ([][]byte, protocol.Head) {
	t.Helper()
	var raws [][]byte
	var h protocol.Head
	for i := 1; i <= n; i++ {
		data, err := protocol.EncodeData(map[string]any{"i": i, "body": "event body"})
		if err != nil {
			t.Fatal(err)
		}
		ev := &protocol.Event{Realm: realm, Seq: uint64(i), Type: "t.test", At: 1_700_000_000_000 + int64(i), Author: realm + ":bot", Data: data}
		if h.Seq > 0 {
			ev.Prev = protocol.Link{Cid: h.CID}
		}
		raw, c, err := ev.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
		h = protocol.Head{Seq: uint64(i), CID: c}
	}
	return raws, h
}

// fixture is what a test file holds.
type fixture struct {
	home, away   [][]byte
	homeH, awayH protocol.Head
	events       [][]byte // interleaved, as a node receiving both holds them
	blobs        []Blob
}

func newFixture(t testing.TB, homeEvents, awayEvents int) *fixture {
	f := &fixture{}
	f.home, f.homeH = chain(t, "home", testKey(1), homeEvents)
	f.away, f.awayH = chain(t, "away", testKey(2), awayEvents)
	for i := range f.home {
		f.events = append(f.events, f.home[i])
		if i < len(f.away) {
			f.events = append(f.events, f.away[i])
		}
	}
	for _, data := range [][]byte{[]byte("\x89PNG\r\n\x1a\nnot really"), bytes.Repeat([]byte{7}, 300)} {
		f.blobs = append(f.blobs, Blob{CID: protocol.BlobCID(data).Bytes(), MediaType: "image/png", Data: data})
	}
	return f
}

func (f *fixture) heads() map[protocol.Realm]protocol.Head {
	return map[protocol.Realm]protocol.Head{"home": f.homeH, "away": f.awayH}
}

// write makes the file; edit, when set, may change what is written.
func (f *fixture) write(t testing.TB, compress bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Origin: "home", CreatedAt: 1_700_000_000_000, Relay: "test", Events: uint64(len(f.events))}, compress)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Key(RealmKey{Realm: "away", Public: pubOf(testKey(2))}))
	must(w.Key(RealmKey{Realm: "home", Public: pubOf(testKey(1))}))
	must(w.Secret(Secret{Realm: "home", Key: []byte("secret bytes")}))
	for _, raw := range f.events {
		must(w.Event(raw))
	}
	for _, b := range f.blobs {
		must(w.Blob(b))
	}
	must(w.Close(f.heads()))
	if w.Bytes() != int64(buf.Len()) {
		t.Fatalf("Bytes %d, wrote %d", w.Bytes(), buf.Len())
	}
	return buf.Bytes()
}

// collect reads a file with a sink that keeps everything.
type collected struct {
	keys   map[protocol.Realm]ed25519.PublicKey
	secret *Secret
	events []store.Checked
	chunks int
	blobs  []Blob
}

func readAll(file []byte, opts Options) (*collected, Summary, error) {
	c := &collected{}
	sum, err := Read(context.Background(), bytes.NewReader(file), opts, Sink{
		Begin: func(s Start) error {
			c.keys, c.secret = s.Keys, s.Secret
			return nil
		},
		Events: func(evs []store.Checked) error {
			c.events = append(c.events, evs...)
			c.chunks++
			return nil
		},
		Blob: func(b Blob) error { c.blobs = append(c.blobs, b); return nil },
	})
	return c, sum, err
}

func TestRoundTrip(t *testing.T) {
	f := newFixture(t, 6, 3)
	for _, compress := range []bool{false, true} {
		file := f.write(t, compress)
		var calls int
		got, sum, err := readAll(file, Options{ChunkEvents: 4, Workers: 3, Progress: func(Progress) { calls++ }})
		if err != nil {
			t.Fatalf("compress %v: %v", compress, err)
		}
		if sum.Header.Origin != "home" || sum.Events != 9 || sum.Blobs != 2 || sum.Keys != 2 || !sum.Secret {
			t.Fatalf("summary %+v", sum)
		}
		if sum.Heads["home"] != f.homeH || sum.Heads["away"] != f.awayH || len(sum.Heads) != 2 {
			t.Fatalf("heads %v", sum.Heads)
		}
		if len(got.events) != len(f.events) || got.chunks != 3 {
			t.Fatalf("%d events in %d chunks", len(got.events), got.chunks)
		}
		for i, e := range got.events {
			if !bytes.Equal(e.Raw, f.events[i]) || e.CID != protocol.CIDOf(f.events[i]) {
				t.Fatalf("event %d differs", i+1)
			}
		}
		if !got.keys["home"].Equal(pubOf(testKey(1))) || string(got.secret.Key) != "secret bytes" {
			t.Fatalf("keys %v secret %v", got.keys, got.secret)
		}
		if len(got.blobs) != 2 || !bytes.Equal(got.blobs[1].Data, f.blobs[1].Data) {
			t.Fatalf("blobs %d", len(got.blobs))
		}
		if calls != 3+2 {
			t.Fatalf("progress called %d times", calls)
		}
	}
}

func TestEmpty(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Origin: "home"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	sum, err := Read(context.Background(), &buf, Options{}, Sink{})
	if err != nil || sum.Events != 0 || len(sum.Heads) != 0 {
		t.Fatalf("%+v %v", sum, err)
	}
}

// Every single flipped byte and every truncation is refused, plain or
// compressed.
func TestDamageIsRefused(t *testing.T) {
	f := newFixture(t, 2, 1)
	for _, compress := range []bool{false, true} {
		file := f.write(t, compress)
		want, _, err := readAll(file, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range file {
			bad := bytes.Clone(file)
			bad[i] ^= 1 << (i % 8)
			got, _, err := readAll(bad, Options{Workers: 1})
			if err == nil && compress && sameContent(got, want) {
				// gzip leaves a few bits unchecked (its header's flags,
				// time and OS; padding after the last block): what they
				// change is not data.
				continue
			}
			if !isFileError(err) {
				t.Fatalf("compress %v: byte %d flipped: %v", compress, i, err)
			}
		}
		for n := range len(file) {
			_, _, err := readAll(file[:n], Options{Workers: 1})
			if !isFileError(err) {
				t.Fatalf("compress %v: cut at %d of %d: %v", compress, n, len(file), err)
			}
			// A compressed file cut anywhere after gzip's magic is a
			// damaged export, never another kind of file.
			if compress && n >= 2 && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("compress %v: cut at %d of %d: %v, want %v", compress, n, len(file), err, ErrCorrupt)
			}
		}
		if _, _, err := readAll(append(bytes.Clone(file), 0), Options{}); !isFileError(err) {
			t.Fatalf("compress %v: a byte after the end: %v", compress, err)
		}
	}
}

func sameContent(a, b *collected) bool {
	if len(a.events) != len(b.events) || len(a.blobs) != len(b.blobs) || !bytes.Equal(a.secret.Key, b.secret.Key) || len(a.keys) != len(b.keys) {
		return false
	}
	for i := range a.events {
		if !bytes.Equal(a.events[i].Raw, b.events[i].Raw) {
			return false
		}
	}
	for i := range a.blobs {
		if !bytes.Equal(a.blobs[i].Data, b.blobs[i].Data) || a.blobs[i].MediaType != b.blobs[i].MediaType {
			return false
		}
	}
	for r, k := range a.keys {
		if !k.Equal(b.keys[r]) {
			return false
		}
	}
	return true
}

func isFileError(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotExport) || errors.Is(err, ErrUnverified)
}

// rawFile assembles frames by hand, for files the Writer refuses to make.
type rawFile struct{ b []byte }

// paddedFrame is frame with the length, under 128, written in two bytes:
// the same frame, framed another way.
func (r *rawFile) paddedFrame(t testing.TB, k Kind, v any) *rawFile {
	n := len(r.b)
	r.cbor(t, k, v)
	if r.b[n+1] >= 0x80 {
		t.Fatal("paddedFrame takes a payload under 128 bytes")
	}
	r.b = slices.Insert(r.b, n+2, 0)
	r.b[n+1] |= 0x80
	return r
}

func newRawFile(t testing.TB, hdr Header) *rawFile {
	r := &rawFile{b: append([]byte(Magic), Version)}
	r.cbor(t, KindHeader, &hdr)
	return r
}

func (r *rawFile) frame(k Kind, payload []byte) *rawFile {
	r.b = append(r.b, byte(k))
	r.b = binary.AppendUvarint(r.b, uint64(len(payload)))
	r.b = append(r.b, payload...)
	r.b = binary.BigEndian.AppendUint32(r.b, crc32.Update(crc32.Checksum([]byte{byte(k)}, castagnoli), castagnoli, payload))
	return r
}

func (r *rawFile) cbor(t testing.TB, k Kind, v any) *rawFile {
	b, err := protocol.MarshalCanonical(v)
	if err != nil {
		t.Fatal(err)
	}
	return r.frame(k, b)
}

func trailerFor(events, blobs int, heads ...protocol.Head) *Trailer {
	t := &Trailer{Events: uint64(events), Blobs: uint64(blobs), Heads: []HeadLine{}}
	for _, h := range heads {
		t.Heads = append(t.Heads, HeadLine{Realm: "home", Seq: h.Seq, CID: h.CID.Bytes()})
	}
	return t
}

func TestRefusals(t *testing.T) {
	home, homeH := chain(t, "home", testKey(1), 3)
	forged, _ := chain(t, "home", testKey(9), 3)
	homeKey := &RealmKey{Realm: "home", Public: pubOf(testKey(1))}
	hdr := func(n int) Header { return Header{Origin: "home", Events: uint64(n)} }
	// events writes a file of home's key, the given events and a trailer
	// claiming heads.
	events := func(raws [][]byte, heads ...protocol.Head) []byte {
		r := newRawFile(t, hdr(len(raws))).cbor(t, KindKey, homeKey)
		for _, raw := range raws {
			r.frame(KindEvent, raw)
		}
		return r.cbor(t, KindTrailer, trailerFor(len(raws), 0, heads...)).b
	}
	badBlob := Blob{CID: protocol.BlobCID([]byte("a")).Bytes(), MediaType: "image/png", Data: []byte("b")}
	// described writes a file of home's key with a descriptor.
	described := func(desc []byte) []byte {
		k := &RealmKey{Realm: "home", Public: pubOf(testKey(1)), Descriptor: desc}
		return newRawFile(t, hdr(0)).cbor(t, KindKey, k).cbor(t, KindTrailer, trailerFor(0, 0)).b
	}
	forgedDesc := bytes.Clone(descriptor(t, "home", testKey(1)))
	forgedDesc[len(forgedDesc)-1] ^= 1
	var refusalTests = []struct {
		name string
		file []byte
		opts Options
		want error
	}{
		{"good", events(home, homeH), Options{}, nil},
		{"not an export", []byte("SQLite format 3\x00"), Options{}, ErrNotExport},
		{"empty", nil, Options{}, ErrNotExport},
		{"future version", append([]byte(Magic), 2), Options{}, ErrNotExport},
		{"version in more bytes than it takes", slices.Concat([]byte(Magic), []byte{0x80 | Version, 0}, events(home, homeH)[len(Magic)+1:]), Options{}, ErrCorrupt},
		{"frame length in more bytes than it takes", newRawFile(t, hdr(0)).paddedFrame(t, KindKey, homeKey).cbor(t, KindTrailer, trailerFor(0, 0)).b, Options{}, ErrCorrupt},
		{"gap", events([][]byte{home[0], home[2]}, homeH), Options{}, protocol.ErrChainBroken},
		{"not from 1", events(home[1:], homeH), Options{}, protocol.ErrChainBroken},
		{"twice", events([][]byte{home[0], home[0]}, homeH), Options{}, protocol.ErrChainBroken},
		{"wrong signature", events(forged, homeH), Options{}, protocol.ErrBadSignature},
		{"one forged event", events([][]byte{home[0], home[1], forged[2]}, homeH), Options{}, protocol.ErrBadSignature},
		{"not an event", events([][]byte{[]byte{0xa0}}, homeH), Options{}, protocol.ErrInvalidEvent},
		{"trailer short of the chain", events(home, protocol.Head{Seq: 2, CID: protocol.CIDOf(home[1])}), Options{}, ErrCorrupt},
		{"trailer beyond the chain", events(home[:2], homeH), Options{}, ErrCorrupt},
		{"trailer names a realm twice", twoRealms(t, true), Options{}, ErrCorrupt},
		{"two realms", twoRealms(t, false), Options{}, nil},
		{"known key differs", events(home, homeH), Options{Known: func(protocol.Realm) (ed25519.PublicKey, bool) { return pubOf(testKey(5)), true }}, ErrKeyMismatch},
		{"no key", newRawFile(t, hdr(1)).frame(KindEvent, home[0]).cbor(t, KindTrailer, trailerFor(1, 0, protocol.Head{Seq: 1, CID: protocol.CIDOf(home[0])})).b, Options{}, ErrUnverified},
		{"more events than announced", newRawFile(t, hdr(1)).cbor(t, KindKey, homeKey).frame(KindEvent, home[0]).frame(KindEvent, home[1]).b, Options{}, ErrCorrupt},
		{"fewer events than announced", newRawFile(t, hdr(4)).cbor(t, KindKey, homeKey).frame(KindEvent, home[0]).cbor(t, KindTrailer, trailerFor(1, 0)).b, Options{}, ErrCorrupt},
		{"key after events", newRawFile(t, hdr(1)).cbor(t, KindKey, homeKey).frame(KindEvent, home[0]).cbor(t, KindKey, homeKey).b, Options{}, ErrCorrupt},
		{"two keys for a realm", newRawFile(t, hdr(0)).cbor(t, KindKey, homeKey).cbor(t, KindKey, homeKey).b, Options{}, ErrCorrupt},
		{"short key", newRawFile(t, hdr(0)).cbor(t, KindKey, &RealmKey{Realm: "home", Public: []byte{1}}).b, Options{}, ErrCorrupt},
		{"secret of another realm", newRawFile(t, hdr(0)).cbor(t, KindSecret, &Secret{Realm: "away", Key: []byte{1}}).b, Options{}, ErrCorrupt},
		{"blob cid", newRawFile(t, hdr(0)).cbor(t, KindBlob, &badBlob).cbor(t, KindTrailer, trailerFor(0, 1)).b, Options{}, ErrUnverified},
		{"unknown kind", newRawFile(t, hdr(0)).frame('Q', nil).b, Options{}, ErrCorrupt},
		{"oversized frame", append(newRawFile(t, hdr(1)).b, byte(KindEvent), 0xff, 0xff, 0xff, 0xff, 0x0f), Options{}, ErrCorrupt},
		{"non-canonical header", append(append([]byte(Magic), Version), frameBytes(KindHeader, []byte{0xa1, 0x66, 'o', 'r', 'i', 'g', 'i', 'n', 0x64, 'h', 'o', 'm', 'e', 0xff})...), Options{}, ErrCorrupt},
		{"no trailer", newRawFile(t, hdr(0)).b, Options{}, ErrCorrupt},
		{"descriptor", described(descriptor(t, "home", testKey(1))), Options{}, nil},
		{"descriptor of another key", described(descriptor(t, "home", testKey(2))), Options{}, ErrUnverified},
		{"descriptor of another realm", described(descriptor(t, "away", testKey(1))), Options{}, ErrUnverified},
		{"forged descriptor", described(forgedDesc), Options{}, protocol.ErrBadDescriptor},
	}
	for _, tc := range refusalTests {
		_, _, err := readAll(tc.file, tc.opts)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// descriptor is realm's descriptor signed with key.
func descriptor(t testing.TB, realm string, key ed25519.PrivateKey) []byte {
	t.Helper()
	b, err := protocol.SignDescriptor(&protocol.Descriptor{Realm: realm, Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}, At: 1}, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// twoRealms is a file of two chains whose trailer names both, or (twice)
// names the first one only.
func twoRealms(t *testing.T, twice bool) []byte {
	home, homeH := chain(t, "home", testKey(1), 2)
	away, awayH := chain(t, "away", testKey(2), 2)
	r := newRawFile(t, Header{Origin: "home", Events: 4}).
		cbor(t, KindKey, &RealmKey{Realm: "away", Public: pubOf(testKey(2))}).
		cbor(t, KindKey, &RealmKey{Realm: "home", Public: pubOf(testKey(1))})
	for i := range 2 {
		r.frame(KindEvent, home[i]).frame(KindEvent, away[i])
	}
	tr := &Trailer{Events: 4, Heads: []HeadLine{
		{Realm: "away", Seq: awayH.Seq, CID: awayH.CID.Bytes()},
		{Realm: "home", Seq: homeH.Seq, CID: homeH.CID.Bytes()},
	}}
	if twice {
		tr.Heads[1] = tr.Heads[0]
	}
	return r.cbor(t, KindTrailer, tr).b
}

func frameBytes(k Kind, payload []byte) []byte { return (&rawFile{}).frame(k, payload).b }

// A sink's error stops the read and is returned as it is.
func TestSinkError(t *testing.T) {
	f := newFixture(t, 6, 3)
	file := f.write(t, false)
	stop := errors.New("disk full")
	for _, sink := range []Sink{
		{Begin: func(Start) error { return stop }},
		{Events: func([]store.Checked) error { return stop }},
		{Blob: func(Blob) error { return stop }},
	} {
		if _, err := Read(context.Background(), bytes.NewReader(file), Options{ChunkEvents: 2}, sink); !errors.Is(err, stop) {
			t.Fatalf("%v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, bytes.NewReader(file), Options{}, Sink{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// The Writer refuses what would make a file Read refuses.
func TestWriterRefuses(t *testing.T) {
	home, homeH := chain(t, "home", testKey(1), 1)
	w, err := NewWriter(io.Discard, Header{Origin: "home", Events: 2}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Event(home[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Key(RealmKey{Realm: "home", Public: pubOf(testKey(1))}); err == nil {
		t.Fatal("a key after an event")
	}
	w, _ = NewWriter(io.Discard, Header{Origin: "home"}, false)
	if err := w.Key(RealmKey{Realm: "away", Public: pubOf(testKey(1)), Descriptor: descriptor(t, "away", testKey(2))}); err == nil {
		t.Fatal("a descriptor of another key")
	}
	w, _ = NewWriter(io.Discard, Header{Origin: "home", Events: 2}, false)
	w.Event(home[0])
	if err := w.Close(map[protocol.Realm]protocol.Head{"home": homeH}); err == nil {
		t.Fatal("fewer events than announced")
	}
	if _, err := NewWriter(io.Discard, Header{Origin: "Not A Realm"}, false); err == nil {
		t.Fatal("bad origin")
	}
	w, _ = NewWriter(io.Discard, Header{Origin: "home"}, false)
	if err := w.Secret(Secret{Realm: "away"}); err == nil {
		t.Fatal("secret of another realm")
	}
	w, _ = NewWriter(io.Discard, Header{Origin: "home"}, false)
	if err := w.Blob(Blob{CID: cid.Undef.Bytes(), Data: make([]byte, MaxBlobSize+2<<10)}); err == nil {
		t.Fatal("oversized blob")
	}
}

// Without VerifyAll only each chunk's newest event per realm has its
// signature checked; the hash links cover the rest. So an event its own
// realm signed badly and then linked to passes, and VerifyAll catches it.
func TestVerifyAll(t *testing.T) {
	key := testKey(1)
	var raws [][]byte
	var h protocol.Head
	for i := 1; i <= 3; i++ {
		ev := &protocol.Event{Realm: "home", Seq: uint64(i), Type: "t.test", At: int64(i), Author: "home:bot", Data: []byte{0xa0}}
		if h.Seq > 0 {
			ev.Prev = protocol.Link{Cid: h.CID}
		}
		raw, _, err := ev.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			ev.Sig[0] ^= 1
			if raw, err = protocol.MarshalCanonical(ev); err != nil {
				t.Fatal(err)
			}
		}
		raws = append(raws, raw)
		h = protocol.Head{Seq: uint64(i), CID: protocol.CIDOf(raw)}
	}
	file := newRawFile(t, Header{Origin: "home", Events: 3}).cbor(t, KindKey, &RealmKey{Realm: "home", Public: pubOf(key)})
	for _, raw := range raws {
		file.frame(KindEvent, raw)
	}
	file.cbor(t, KindTrailer, trailerFor(3, 0, h))
	if _, _, err := readAll(file.b, Options{}); err != nil {
		t.Fatalf("newest signatures only: %v", err)
	}
	if _, _, err := readAll(file.b, Options{VerifyAll: true}); !errors.Is(err, protocol.ErrBadSignature) {
		t.Fatalf("every signature: %v", err)
	}
	// A chunk boundary after the bad event makes it a chunk's newest.
	if _, _, err := readAll(file.b, Options{ChunkEvents: 2}); !errors.Is(err, protocol.ErrBadSignature) {
		t.Fatalf("chunks of 2: %v", err)
	}
}
