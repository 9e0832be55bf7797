package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// Checked is an event its caller decoded with protocol.DecodeEvent: what
// Restore appends, its signature verified by the caller, and what
// QueueDecodedChain stores.
type Checked struct {
	Event *protocol.Event
	CID   cid.Cid // CIDOf(Raw), as DecodeEvent returned it
	Raw   []byte  // canonical signed encoding; kept, so not to be changed after
}

// Restore queues already checked events to be appended, in order, in one
// op: one Badger transaction, against one fsync. It is the bulk path of
// `relay import`, where decoding and signature checks run in parallel ahead
// of the store. The op first checks that the store holds after events (the
// sum of its realms' heads), so a caller can queue the next chunk
// before the last is durable — the committer projects it while the writer
// commits the one before — and still never store a chunk whose predecessor
// failed. Each event must extend its realm's chain as the op sees it (else
// protocol.ErrChainBroken) and runs through every projector, or is parked,
// as with Ingest; unlike Ingest it keeps no equivocation evidence. On any error nothing of
// the op is stored. The op must fit one transaction (see fits), so the
// caller bounds how many events and bytes it passes.
//
// wait returns the op's result once its batch has committed. Calls from one
// goroutine run in call order.
func (s *Store) Restore(ctx context.Context, after uint64, evs []Checked) (wait func() error) {
	o := &op{events: len(evs), run: func(tx *Tx) (*StoredEvent, error) {
		if err := tx.holds(after); err != nil {
			return nil, err
		}
		for _, e := range evs {
			if err := tx.follows(e); err != nil {
				return nil, err
			}
			if _, err := tx.ingestEvent(e.Event, e.CID, e.Raw); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}}
	if err := s.queue(ctx, o); err != nil {
		return func() error { return err }
	}
	return func() error {
		_, err := s.await(ctx, o)
		return err
	}
}

// RestoreRefused appends one checked event of another realm, as Restore
// does, but without projecting it: it is recorded as refused (ParkedEvents),
// as when a projector refused it where it was exported. An import restores
// so an event whose Restore a projector refused.
func (s *Store) RestoreRefused(ctx context.Context, after uint64, e Checked, why string) error {
	_, err := s.do(ctx, &op{run: func(tx *Tx) (*StoredEvent, error) {
		if err := tx.holds(after); err != nil {
			return nil, err
		}
		if e.Event.Realm == string(s.cfg.Realm) {
			return nil, errors.New("store: the node's own events are never refused")
		}
		if err := tx.follows(e); err != nil {
			return nil, err
		}
		return nil, tx.park(&StoredEvent{Event: e.Event, CID: e.CID, Raw: e.Raw}, prefixRefused, nil, why)
	}})
	return err
}

// holds checks that the store holds after events, as a restore's op was
// queued after (ErrSequence otherwise: a chunk before it failed).
func (tx *Tx) holds(after uint64) error {
	if held := tx.held(); held != after {
		return fmt.Errorf("%w: restore after %d events, the store holds %d", ErrSequence, after, held)
	}
	return nil
}

// follows checks that e extends its realm's chain as the op sees it.
func (tx *Tx) follows(e Checked) error {
	if err := e.Event.Follows(tx.head(e.Event.Realm)); err != nil {
		return fmt.Errorf("%s seq %d: %w", e.Event.Realm, e.Event.Seq, err)
	}
	return nil
}

// EachEvent calls fn for every event the transaction's snapshot holds with
// node Sequence > after, in Sequence order, until fn returns an error
// (ErrStop ends it quietly). Meant for a View: one consistent snapshot
// however long the walk, which is what an export needs.
func (tx *Tx) EachEvent(after uint64, fn func(*StoredEvent) error) error {
	return tx.Iterate(prefixSequence, false, func(k, v []byte) error {
		n, err := decodeU64(k[len(prefixSequence):])
		if err != nil {
			return err
		}
		if n <= after {
			return nil
		}
		se, err := tx.eventAt(placeKey(v))
		if err != nil {
			return err
		}
		return fn(se)
	})
}

// Heads returns the newest event of every realm the transaction sees.
func (tx *Tx) Heads() (map[protocol.Realm]protocol.Head, error) {
	out := make(map[protocol.Realm]protocol.Head)
	err := tx.Iterate(prefixHead, false, func(k, v []byte) error {
		h, err := decodeHead(v)
		if err != nil {
			return err
		}
		out[protocol.Realm(k[len(prefixHead):])] = h
		return nil
	})
	return out, err
}

// RaiseID sets the NextID counter name to n when it is lower, so that NextID
// continues after numbers the log already holds: after a restore, the
// counters (local, not in the log) start at zero while the events carry the
// numbers handed out before.
func (tx *Tx) RaiseID(name string, n uint64) error {
	if tx.readOnly {
		return ErrReadOnly
	}
	if name == "" {
		return fmt.Errorf("store: RaiseID needs a name")
	}
	key := idKey(name)
	switch v, err := tx.Get(key); {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	default:
		cur, err := decodeU64(v)
		if err != nil {
			return err
		}
		if cur >= n {
			return nil
		}
	}
	if n > 0 {
		tx.put(key, u64(n))
	}
	return nil
}
