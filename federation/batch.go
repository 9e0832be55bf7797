package federation

import (
	"encoding/binary"
	"errors"
	"fmt"

	"relay/protocol"
	"relay/store"
)

// A gossip message carries a run of consecutive events of its topic's realm:
// each event's canonical bytes after its length as a uvarint. The origin
// puts into one message whatever it committed while the last one was sent,
// so that under load the per-message costs (framing, message IDs in
// IDONTWANT and IHAVE, one validation and one store op at each replica) are
// paid once for several events, and when idle an event goes alone at once.
//
// Every event of a message is decoded and linked to the one before at every
// replica; one signature, the newest event's, authenticates them all
// (authenticRun).

// Limits of a gossip message. maxGossipBytes bounds the events of one
// message; an event larger than that (up to protocol.MaxEventSize) goes
// alone.
const (
	maxGossipEvents = 256
	maxGossipBytes  = 64 << 10
	// maxGossipMessage is the largest message data: one event of the
	// largest size, or a run within maxGossipBytes, with their lengths.
	maxGossipMessage = protocol.MaxEventSize + binary.MaxVarintLen32
)

var errBadMessage = errors.New("federation: malformed gossip message")

// encodeRun frames raws as one gossip message.
func encodeRun(raws [][]byte) []byte {
	n := 0
	for _, raw := range raws {
		n += binary.MaxVarintLen32 + len(raw)
	}
	b := make([]byte, 0, n)
	for _, raw := range raws {
		b = binary.AppendUvarint(b, uint64(len(raw)))
		b = append(b, raw...)
	}
	return b
}

// splitRun returns the events a gossip message frames, as slices of b. It
// checks the framing only: each event is decoded by the caller.
func splitRun(b []byte) ([][]byte, error) {
	if len(b) == 0 || len(b) > maxGossipMessage {
		return nil, errBadMessage
	}
	var raws [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || k != protocol.UvarintLen(n) || n == 0 || n > uint64(len(b)-k) || n > protocol.MaxEventSize {
			return nil, errBadMessage
		}
		if len(raws) == maxGossipEvents {
			return nil, fmt.Errorf("%w: more than %d events", errBadMessage, maxGossipEvents)
		}
		raws = append(raws, b[k:k+int(n)])
		b = b[k+int(n):]
	}
	return raws, nil
}

// runs cuts the realm's own newly committed events into gossip messages:
// each a run of consecutive events within the limits.
func runs(evs []*store.StoredEvent) [][][]byte {
	var out [][][]byte
	var cur [][]byte
	size, last := 0, uint64(0)
	for _, se := range evs {
		n := len(se.Raw)
		if len(cur) > 0 && (se.Event.Seq != last+1 || len(cur) == maxGossipEvents || size+n > maxGossipBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, se.Raw)
		size += n
		last = se.Event.Seq
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
