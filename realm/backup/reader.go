package backup

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"relay/protocol"
)

// Frame is one frame read; the field of its Kind is set.
type Frame struct {
	Kind    Kind
	Key     *RealmKey
	Secret  *Secret
	Event   []byte
	Blob    *Blob
	Trailer *Trailer
}

// Reader reads the frames of an export file, checking what needs no
// context: magic, version, lengths, CRCs, the order of kinds, the shape of
// each payload, the counts and that nothing follows the trailer. Chains,
// signatures and blob CIDs are Read's.
type Reader struct {
	br     *bufio.Reader
	hdr    Header
	stage  Kind
	frame0 uint64 // the frame being read, from 1 (the header)
	off0   int64  // where it starts in the uncompressed stream
	offset int64  // where the next one starts
	keys   map[string]bool
	secret bool
	events uint64
	blobs  uint64
	done   bool
}

// NewReader reads the magic, the version and the header; a gzip-compressed
// file is recognised and read through.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	gzipped := false
	if p, _ := br.Peek(2); len(p) == 2 && p[0] == 0x1f && p[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, truncated(err))
		}
		br, gzipped = bufio.NewReaderSize(gz, 64<<10), true
	}
	magic := make([]byte, len(Magic))
	_, err := io.ReadFull(br, magic)
	switch {
	case err != nil && gzipped && !errors.Is(err, io.EOF):
		// The compressed stream broke off (or broke) before its first
		// bytes: a damaged file, not another kind.
		return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, truncated(err))
	case err != nil || string(magic) != Magic:
		return nil, fmt.Errorf("%w: no export magic at the start", ErrNotExport)
	}
	v, err := protocol.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("%w: version: %v", ErrCorrupt, truncated(err))
	}
	if v != Version {
		return nil, fmt.Errorf("%w: format version %d, this relay reads %d", ErrNotExport, v, Version)
	}
	rd := &Reader{br: br, stage: KindHeader, keys: map[string]bool{},
		offset: int64(len(Magic) + len(binary.AppendUvarint(nil, v)))}
	k, payload, err := rd.frame()
	if errors.Is(err, io.EOF) {
		return nil, rd.corrupt("the file ends before its header: truncated")
	}
	if err != nil {
		return nil, err
	}
	if k != KindHeader {
		return nil, rd.corrupt("first frame is %q, not the header", k)
	}
	if err := decode(payload, &rd.hdr); err != nil {
		return nil, rd.corrupt("header: %v", err)
	}
	if _, err := protocol.ParseRealm(rd.hdr.Origin); err != nil {
		return nil, rd.corrupt("header: origin: %v", err)
	}
	return rd, nil
}

// Header is the file's header.
func (r *Reader) Header() Header { return r.hdr }

// Events is how many event frames have been read.
func (r *Reader) Events() uint64 { return r.events }

// Next returns the next frame, or io.EOF once the trailer has been read and
// the file ends there.
func (r *Reader) Next() (Frame, error) {
	if r.done {
		return Frame{}, io.EOF
	}
	k, payload, err := r.frame()
	if errors.Is(err, io.EOF) {
		return Frame{}, r.corrupt("the file ends before its trailer: truncated")
	}
	if err != nil {
		return Frame{}, err
	}
	if order(k) < order(r.stage) || k == KindHeader {
		return Frame{}, r.corrupt("%q frame after %q", k, r.stage)
	}
	r.stage = k
	f := Frame{Kind: k}
	switch k {
	case KindKey:
		f.Key = new(RealmKey)
		if err := decode(payload, f.Key); err != nil {
			return Frame{}, r.corrupt("key: %v", err)
		}
		if _, err := protocol.ParseRealm(f.Key.Realm); err != nil {
			return Frame{}, r.corrupt("key: %v", err)
		}
		if len(f.Key.Public) != 32 {
			return Frame{}, r.corrupt("key of %s: %d bytes", f.Key.Realm, len(f.Key.Public))
		}
		if r.keys[f.Key.Realm] {
			return Frame{}, r.corrupt("second key for realm %s", f.Key.Realm)
		}
		if len(r.keys) >= MaxRealms {
			return Frame{}, r.corrupt("more than %d realms", MaxRealms)
		}
		r.keys[f.Key.Realm] = true
	case KindSecret:
		f.Secret = new(Secret)
		if err := decode(payload, f.Secret); err != nil {
			return Frame{}, r.corrupt("secret: %v", err)
		}
		if r.secret {
			return Frame{}, r.corrupt("second secret")
		}
		if f.Secret.Realm != r.hdr.Origin {
			return Frame{}, r.corrupt("secret of %q in an export of %s", f.Secret.Realm, r.hdr.Origin)
		}
		r.secret = true
	case KindEvent:
		r.events++
		if r.events > r.hdr.Events {
			return Frame{}, r.corrupt("more events than the %d the header announced", r.hdr.Events)
		}
		f.Event = payload
	case KindBlob:
		f.Blob = new(Blob)
		if err := decode(payload, f.Blob); err != nil {
			return Frame{}, r.corrupt("blob: %v", err)
		}
		r.blobs++
	case KindTrailer:
		f.Trailer = new(Trailer)
		if err := decode(payload, f.Trailer); err != nil {
			return Frame{}, r.corrupt("trailer: %v", err)
		}
		t := f.Trailer
		if t.Events != r.events || r.events != r.hdr.Events || t.Blobs != r.blobs {
			return Frame{}, r.corrupt("trailer counts %d events and %d blobs, the file holds %d and %d (header: %d events)",
				t.Events, t.Blobs, r.events, r.blobs, r.hdr.Events)
		}
		// A last read to EOF: nothing may follow, and a gzip stream checks
		// its own CRC only there.
		if n, err := r.br.Read(make([]byte, 1)); n > 0 {
			return Frame{}, r.corrupt("data after the trailer")
		} else if !errors.Is(err, io.EOF) {
			return Frame{}, r.corrupt("after the trailer: %v", err)
		}
		r.done = true
	default:
		return Frame{}, r.corrupt("unknown frame kind %q", k)
	}
	return f, nil
}

// frame reads one frame and checks its length bound and CRC. io.EOF means
// the stream ended cleanly before a frame.
func (r *Reader) frame() (Kind, []byte, error) {
	r.frame0++
	r.off0 = r.offset
	kb, err := r.br.ReadByte()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return 0, nil, io.EOF
		}
		return 0, nil, r.corrupt("%v", err)
	}
	k := Kind(kb)
	limit, ok := MaxFrame[k]
	if !ok {
		return 0, nil, r.corrupt("unknown frame kind 0x%02x", kb)
	}
	n, err := protocol.ReadUvarint(r.br) // the checksum does not cover it
	if err != nil {
		return 0, nil, r.corrupt("%q frame length: %v", k, truncated(err))
	}
	if n > uint64(limit) {
		return 0, nil, r.corrupt("%q frame of %d bytes, over the %d allowed", k, n, limit)
	}
	payload, err := readN(r.br, int(n))
	if err != nil {
		return 0, nil, r.corrupt("%q frame: %v", k, truncated(err))
	}
	var sum [4]byte
	if _, err := io.ReadFull(r.br, sum[:]); err != nil {
		return 0, nil, r.corrupt("%q frame checksum: %v", k, truncated(err))
	}
	crc := crc32.Update(crc32.Checksum([]byte{kb}, castagnoli), castagnoli, payload)
	if binary.BigEndian.Uint32(sum[:]) != crc {
		return 0, nil, r.corrupt("%q frame: checksum mismatch (damaged bytes)", k)
	}
	r.offset += 1 + int64(len(binary.AppendUvarint(nil, n))) + int64(n) + 4
	return k, payload, nil
}

// readN reads n bytes, growing the buffer as data arrives, so a length
// claimed by a short file costs no more memory than the file has.
func readN(r io.Reader, n int) ([]byte, error) {
	const step = 1 << 20
	if n <= step {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	var buf bytes.Buffer
	for buf.Len() < n {
		if _, err := io.CopyN(&buf, r, int64(min(step, n-buf.Len()))); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// decode reads a payload that must be the canonical encoding of v.
func decode(b []byte, v any) error {
	if err := protocol.UnmarshalStrict(b, v); err != nil {
		return err
	}
	again, err := protocol.MarshalCanonical(v)
	if err != nil {
		return err
	}
	if !bytes.Equal(again, b) {
		return protocol.ErrNonCanonical
	}
	return nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("truncated")
	}
	return err
}

// corrupt is ErrCorrupt with where it was found.
func (r *Reader) corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: frame %d at byte %d: %s", ErrCorrupt, r.frame0, r.off0, fmt.Sprintf(format, a...))
}
