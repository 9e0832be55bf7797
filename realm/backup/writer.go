package backup

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	"relay/protocol"
)

// Writer writes an export file. Call Key (and Secret) before the first
// Event, Events before Blobs, and Close last; an out-of-order call is an
// error, so a Writer cannot produce a file Read refuses for its order.
type Writer struct {
	raw    io.Writer
	gz     *gzip.Writer
	buf    *bufio.Writer
	hdr    Header
	stage  Kind
	keys   map[string]bool
	secret bool
	events uint64
	blobs  uint64
	bytes  int64
	err    error
}

// NewWriter writes the magic, the version and hdr to w, gzip-compressed
// when compress is set. Nothing is complete until Close.
func NewWriter(w io.Writer, hdr Header, compress bool) (*Writer, error) {
	if _, err := protocol.ParseRealm(hdr.Origin); err != nil {
		return nil, fmt.Errorf("backup: origin: %w", err)
	}
	bw := &Writer{raw: w, hdr: hdr, stage: KindHeader, keys: map[string]bool{}}
	out := io.Writer(countingWriter{w, &bw.bytes})
	if compress {
		bw.gz = gzip.NewWriter(out)
		out = bw.gz
	}
	bw.buf = bufio.NewWriterSize(out, 256<<10)
	bw.buf.WriteString(Magic)
	bw.buf.Write(binary.AppendUvarint(nil, Version))
	if err := bw.cbor(KindHeader, &hdr); err != nil {
		return nil, err
	}
	return bw, nil
}

// Bytes is how many bytes have reached the underlying writer so far.
func (w *Writer) Bytes() int64 { return w.bytes }

// Key writes the public key of a realm whose events the file holds.
func (w *Writer) Key(k RealmKey) error {
	if err := w.enter(KindKey); err != nil {
		return err
	}
	if _, err := protocol.ParseRealm(k.Realm); err != nil {
		return fmt.Errorf("backup: key: %w", err)
	}
	if len(k.Public) != 32 {
		return fmt.Errorf("backup: key of %s: %d bytes", k.Realm, len(k.Public))
	}
	if w.keys[k.Realm] {
		return fmt.Errorf("backup: second key for realm %s", k.Realm)
	}
	if err := k.CheckDescriptor(); err != nil {
		return fmt.Errorf("backup: key of %s: %w", k.Realm, err)
	}
	if len(w.keys) >= MaxRealms {
		return fmt.Errorf("backup: more than %d realms", MaxRealms)
	}
	w.keys[k.Realm] = true
	return w.cbor(KindKey, &k)
}

// Secret writes the origin realm's private key: the file becomes a secret.
func (w *Writer) Secret(s Secret) error {
	if err := w.enter(KindSecret); err != nil {
		return err
	}
	if w.secret {
		return w.fail(errors.New("backup: second secret"))
	}
	w.secret = true
	if s.Realm != w.hdr.Origin {
		return fmt.Errorf("backup: secret of %s in an export of %s", s.Realm, w.hdr.Origin)
	}
	return w.cbor(KindSecret, &s)
}

// Event writes one raw signed event, as stored.
func (w *Writer) Event(raw []byte) error {
	if err := w.enter(KindEvent); err != nil {
		return err
	}
	w.events++
	return w.frame(KindEvent, raw)
}

// Blob writes one blob.
func (w *Writer) Blob(b Blob) error {
	if err := w.enter(KindBlob); err != nil {
		return err
	}
	if len(b.Data) > MaxBlobSize {
		return fmt.Errorf("backup: blob of %d bytes, over %d", len(b.Data), MaxBlobSize)
	}
	w.blobs++
	return w.cbor(KindBlob, &b)
}

// Close writes the trailer with heads (every realm's newest event written)
// and flushes; it does not close the underlying writer.
func (w *Writer) Close(heads map[protocol.Realm]protocol.Head) error {
	if err := w.enter(KindTrailer); err != nil {
		return err
	}
	if w.events != w.hdr.Events {
		return w.fail(fmt.Errorf("backup: %d events written, the header announced %d", w.events, w.hdr.Events))
	}
	t := Trailer{Events: w.events, Blobs: w.blobs, Heads: []HeadLine{}}
	for r, h := range heads {
		t.Heads = append(t.Heads, HeadLine{Realm: string(r), Seq: h.Seq, CID: h.CID.Bytes()})
	}
	slices.SortFunc(t.Heads, func(a, b HeadLine) int { return strings.Compare(a.Realm, b.Realm) })
	if err := w.cbor(KindTrailer, &t); err != nil {
		return err
	}
	if err := w.buf.Flush(); err != nil {
		return w.fail(err)
	}
	if w.gz != nil {
		if err := w.gz.Close(); err != nil {
			return w.fail(err)
		}
	}
	w.err = errors.New("backup: writer closed")
	return nil
}

// enter moves to stage k, refusing to go back.
func (w *Writer) enter(k Kind) error {
	if w.err != nil {
		return w.err
	}
	if order(k) < order(w.stage) {
		return fmt.Errorf("backup: %c frame after %c", k, w.stage)
	}
	w.stage = k
	return nil
}

func (w *Writer) cbor(k Kind, v any) error {
	b, err := protocol.MarshalCanonical(v)
	if err != nil {
		return w.fail(fmt.Errorf("backup: %c frame: %w", k, err))
	}
	return w.frame(k, b)
}

func (w *Writer) frame(k Kind, payload []byte) error {
	if len(payload) > MaxFrame[k] {
		return w.fail(fmt.Errorf("backup: %c frame of %d bytes, over %d", k, len(payload), MaxFrame[k]))
	}
	crc := crc32.Update(crc32.Checksum([]byte{byte(k)}, castagnoli), castagnoli, payload)
	w.buf.WriteByte(byte(k))
	w.buf.Write(binary.AppendUvarint(nil, uint64(len(payload))))
	w.buf.Write(payload)
	_, err := w.buf.Write(binary.BigEndian.AppendUint32(nil, crc))
	if err != nil {
		return w.fail(err)
	}
	return nil
}

// fail makes every later call return err: a half-written frame cannot be
// taken back.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// order ranks the kinds; a Secret may sit among the Keys.
func order(k Kind) int {
	switch k {
	case KindHeader:
		return 0
	case KindKey, KindSecret:
		return 1
	case KindEvent:
		return 2
	case KindBlob:
		return 3
	case KindTrailer:
		return 4
	}
	return -1
}

type countingWriter struct {
	w io.Writer
	n *int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	*c.n += int64(n)
	return n, err
}
