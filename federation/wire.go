package federation

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// SyncProtocol is the catch-up protocol: one request per stream, answered
// by one or more length-prefixed frames.
const SyncProtocol = "/relay/sync/1.0.0"

// Limits of the catch-up protocol. Every length read off the wire is checked
// against one of them before anything is allocated.
const (
	maxRequestSize   = 4 << 10
	maxHeadsSize     = 4 << 20
	maxRangeEvents   = 1024    // events in one range answer
	maxRangeBytes    = 8 << 20 // bytes of events in one range answer
	maxBlobSize      = 8 << 20
	defaultRangeSize = 512
)

// Request kinds.
const (
	opHeads = "heads"
	opRange = "range"
	opBlob  = "blob"
)

// request is what a peer asks, in one frame.
type request struct {
	Op    string `cbor:"op"`
	Realm string `cbor:"realm,omitempty"`
	From  uint64 `cbor:"from,omitempty"`
	Limit int    `cbor:"limit,omitempty"`
	CID   []byte `cbor:"cid,omitempty"`
}

// wireHead is one realm's head in a heads answer.
type wireHead struct {
	Realm string `cbor:"realm"`
	Seq   uint64 `cbor:"seq"`
	CID   []byte `cbor:"cid"`
}

// headsAnswer is the answer to opHeads: the sender's version vector and the
// signed descriptors of every realm it knows, its own first.
type headsAnswer struct {
	Heads       []wireHead `cbor:"heads"`
	Descriptors [][]byte   `cbor:"descriptors"`
	// Evidence holds both events of each equivocation the sender found, so
	// that every replica quarantines the realm, not only those the lie
	// reached.
	Evidence [][]byte `cbor:"evidence,omitempty"`
}

// maxEvidence bounds the evidence events in one heads answer.
const maxEvidence = 64

var errFrameTooLarge = errors.New("federation: frame too large")

// writeFrame writes one length-prefixed frame; w is buffered by the caller.
func writeFrame(w *bufio.Writer, b []byte) error {
	var n [binary.MaxVarintLen64]byte
	if _, err := w.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// readFrame reads one frame of at most max bytes. An empty frame ends a
// range answer.
func readFrame(r *bufio.Reader, max int) ([]byte, error) {
	n, err := protocol.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", errFrameTooLarge, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

func encodeWire(v any) ([]byte, error) { return protocol.MarshalCanonical(v) }

func decodeRequest(b []byte) (*request, error) {
	var q request
	if err := protocol.UnmarshalStrict(b, &q); err != nil {
		return nil, fmt.Errorf("federation: request: %w", err)
	}
	switch q.Op {
	case opHeads:
	case opRange:
		if _, err := protocol.ParseRealm(q.Realm); err != nil {
			return nil, fmt.Errorf("federation: range: %w", err)
		}
		if q.From == 0 {
			return nil, errors.New("federation: range from 0")
		}
		if q.Limit <= 0 || q.Limit > maxRangeEvents {
			q.Limit = defaultRangeSize
		}
	case opBlob:
		if _, err := cid.Cast(q.CID); err != nil {
			return nil, fmt.Errorf("federation: blob: %w", err)
		}
	default:
		return nil, fmt.Errorf("federation: unknown request %q", q.Op)
	}
	return &q, nil
}

func decodeHeads(b []byte) (*headsAnswer, error) {
	var a headsAnswer
	if err := protocol.UnmarshalStrict(b, &a); err != nil {
		return nil, fmt.Errorf("federation: heads: %w", err)
	}
	for _, h := range a.Heads {
		if _, err := protocol.ParseRealm(h.Realm); err != nil {
			return nil, fmt.Errorf("federation: heads: %w", err)
		}
		if h.Seq > 0 {
			if _, err := cid.Cast(h.CID); err != nil {
				return nil, fmt.Errorf("federation: heads: %s: %w", h.Realm, err)
			}
		}
	}
	return &a, nil
}
