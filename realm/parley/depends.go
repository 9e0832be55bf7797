package parley

import (
	"errors"
	"fmt"

	"relay/protocol"
	"relay/store"
)

// Missing tells the store, by reads alone, that an event of another realm
// refers to a record this node does not hold yet: the thread of its own
// realm it posts in or moderates, a claim it attests or seals, a claim a
// message in its own realm's thread refutes. The store then parks the
// event (store.Dependent) rather than hold back its realm's chain. A reply
// into another realm's thread needs nothing before that realm accepts it.
func (pr projector) Missing(tx *store.Tx, se *store.StoredEvent) error {
	ev := se.Event
	realm := protocol.Realm(ev.Realm)
	var d struct {
		Thread  string   `cbor:"thread"`
		Claim   string   `cbor:"claim"`
		Refutes []string `cbor:"refutes,omitempty"`
	}
	switch ev.Type {
	case evMessagePosted, evThreadState, evThreadPinned, evThreadModerat, evReplyAccepted, evReplyRefused, evClaimAttested, evClaimSealed:
		if protocol.DecodeDataFields(ev.Data, &d) != nil {
			return nil // Apply says what is wrong
		}
	default:
		return nil
	}
	if ev.Type == evClaimAttested || ev.Type == evClaimSealed {
		return claimHeld(tx, realm, d.Claim)
	}
	k, err := protocol.ParseKey(protocol.KeyThread, d.Thread)
	if err != nil || (k.Realm != "" && k.Realm != realm) {
		return nil // another realm's thread: not this event's to need
	}
	if err := pr.threadHeld(tx, rid{realm, k.N}); err != nil {
		return err
	}
	for _, r := range d.Refutes {
		if err := claimHeld(tx, realm, r); err != nil {
			return err
		}
	}
	return nil
}

// threadHeld returns a missingError when thread id is held neither by the
// store nor by the op's changes not yet written (a thread opened earlier in
// the same run). A View has no op: its tx is never in r.ops, which only the
// committer touches.
func (pr projector) threadHeld(tx *store.Tx, id rid) error {
	if !tx.ReadOnly() {
		if c := pr.r.ops[tx]; c != nil {
			if _, ok := c.thread(id); ok {
				return nil
			}
		}
	}
	return held(tx, ridKey(pfxThread, id), "thread %s:th_%d", id)
}

// claimHeld returns a missingError when the claim s, a key written by realm,
// is not held.
func claimHeld(tx *store.Tx, realm protocol.Realm, s string) error {
	k, err := protocol.ParseKey(protocol.KeyClaim, s)
	if err != nil {
		return nil
	}
	if k.Realm == "" {
		k.Realm = realm
	}
	id := rid{k.Realm, k.N}
	return held(tx, key(pfxClaim, id.bytes()), "claim %s:cl_%d", id)
}

func held(tx *store.Tx, k []byte, what string, id rid) error {
	switch _, err := tx.Get(k); {
	case errors.Is(err, store.ErrNotFound):
		return missingError{fmt.Sprintf(what, id.Realm, id.N)}
	default:
		return err
	}
}
