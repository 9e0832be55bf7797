package parley

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	d, ok, err := refsOf(ev)
	if !ok || err != nil || ev.Type == evBoardCreated {
		return nil // nothing to need, or Apply says what is wrong
	}
	switch ev.Type {
	case evClaimSealed:
		if k, err := protocol.ParseKey(protocol.KeyClaim, d.Claim); err != nil || (k.Realm != "" && k.Realm != realm) {
			return nil // not its realm's claim to seal: Apply refuses it
		}
		return pr.claimHeld(tx, realm, d.Claim)
	case evClaimAttested:
		return pr.claimHeld(tx, realm, d.Claim)
	case evThreadOpened:
		if k, err := protocol.ParseKey(protocol.KeyThread, d.Thread); err != nil || (k.Realm != "" && k.Realm != realm) {
			return nil // a thread of another realm: Apply refuses it
		}
		// Its board counts it once held: a thread projected before its
		// board would be counted where one after it is not. (Scopes leave
		// boards out, so that a board's threads need not wait one behind
		// another.)
		if d.Board != 0 {
			if err := pr.boardHeld(tx, rid{realm, d.Board}); err != nil {
				return err
			}
		}
		return pr.refutesHeld(tx, realm, d.Refutes)
	}
	k, err := protocol.ParseKey(protocol.KeyThread, d.Thread)
	if err != nil {
		return nil
	}
	if k.Realm != "" && k.Realm != realm {
		// A reply into another realm's thread joins it, refuting what it
		// refutes, when that realm's word to accept it is held already.
		if ev.Type != evMessagePosted || !acceptedEarly(tx, se, rid{k.Realm, k.N}) {
			return nil
		}
	} else if err := pr.threadHeld(tx, rid{realm, k.N}); err != nil {
		return err
	}
	if err := pr.refutesHeld(tx, realm, d.Refutes); err != nil {
		return err
	}
	if ev.Type == evReplyAccepted {
		// An accepted reply joins the thread where its realm accepted it,
		// before that realm's later events in the thread: were the
		// acceptance kept for the reply, the reply would join the thread
		// when it came, after them, and change the thread's state and
		// last message out of its home's order. So the acceptance waits
		// for its reply, and holds back what shares the thread.
		if err := pr.replyHeld(tx, d.CID, d.Message); err != nil {
			return err
		}
		return pr.replyRefutesHeld(tx, d.CID, rid{realm, k.N})
	}
	return nil
}

// replyHeld returns a missingError when the reply whose event is replyCID
// (message, realm-prefixed) is not held, and its realm's events are taken
// here: a reply of a realm blocked or quarantined here will not come, and
// the acceptance is kept for it, as a refusal is, rather than hold its
// thread back for good. The acceptance carries what the reply does to the
// thread (its effect), which is applied at once; the reply, should it come,
// joins the thread's messages where it was accepted.
func (pr projector) replyHeld(tx *store.Tx, replyCID, message string) error {
	c, err := protocol.ParseCID(replyCID)
	if err != nil {
		return nil // Apply says what is wrong
	}
	if k, err := protocol.ParseKey(protocol.KeyMessage, message); err == nil && k.Realm != "" && pr.refused(k.Realm) {
		return nil
	}
	switch _, err := tx.Get(key(pfxCID, c.Bytes())); {
	case errors.Is(err, store.ErrNotFound):
		return missingError{"reply " + message}
	default:
		return err
	}
}

// refutesHeld checks that the claims a message of realm refutes are held.
func (pr projector) refutesHeld(tx *store.Tx, realm protocol.Realm, refutes []string) error {
	for _, r := range refutes {
		if err := pr.claimHeld(tx, realm, r); err != nil {
			return err
		}
	}
	return nil
}

// acceptedEarly reports whether the thread's realm's acceptance of the
// reply se is held, kept until the reply arrived.
func acceptedEarly(tx *store.Tx, se *store.StoredEvent, thread rid) bool {
	var dec decisionRec
	ok, err := tx.GetJSON(earlyKey(se.CID.Bytes(), thread.Realm), &dec)
	return err == nil && ok && dec.Accepted && dec.Thread == thread
}

// replyRefutesHeld checks, for an acceptance of the reply whose event is
// replyCID, that the claims the reply refutes are held: accepted, it joins
// the thread and refutes them.
func (pr projector) replyRefutesHeld(tx *store.Tx, replyCID string, thread rid) error {
	c, err := protocol.ParseCID(replyCID)
	if err != nil {
		return nil
	}
	var ref cidRef
	if ok, err := tx.GetJSON(key(pfxCID, c.Bytes()), &ref); err != nil || !ok {
		return err // the reply is not held: the word is kept for it
	}
	var m messageRec
	if ok, err := tx.GetJSON(key(pfxMessage, ref.ID.bytes()), &m); err != nil || !ok {
		return err
	}
	if m.Status != ReplyPending || m.Thread != thread {
		return nil
	}
	for _, id := range m.Refutes {
		if err := pr.claimIDHeld(tx, id); err != nil {
			return err
		}
	}
	return nil
}

// refused reports whether realm's events are not taken here (blocked or
// quarantined): a record of it will not come, so nothing waits for one.
func (pr projector) refused(realm protocol.Realm) bool { return refusedBy(pr.refusing, realm) }

// refusedBy reports whether refusing, Config.Refusing or nil, refuses realm.
func refusedBy(refusing func(protocol.Realm) bool, realm protocol.Realm) bool {
	return refusing != nil && refusing(realm)
}

// threadHeld returns a missingError when thread id is held neither by the
// store nor by the op's changes not yet written (a thread opened earlier in
// the same run).
func (pr projector) threadHeld(tx *store.Tx, id rid) error {
	return pr.heldOrChanged(tx, func(c *opChanges) bool { _, ok := c.thread(id); return ok }, ridKey(pfxThread, id), "thread %s:th_%d", id)
}

// boardHeld is threadHeld for a board.
func (pr projector) boardHeld(tx *store.Tx, id rid) error {
	return pr.heldOrChanged(tx, func(c *opChanges) bool { _, ok := c.board(id); return ok }, ridKey(pfxBoard, id), "board %s:%d", id)
}

// heldOrChanged is held, but first asks the op's changes not yet written
// (changed). A View has no op: its tx is never in r.ops, which only the
// committer touches.
func (pr projector) heldOrChanged(tx *store.Tx, changed func(*opChanges) bool, k []byte, what string, id rid) error {
	if !tx.ReadOnly() {
		if c := pr.r.ops[tx]; c != nil && changed(c) {
			return nil
		}
	}
	return held(tx, k, what, id)
}

// claimHeld returns a missingError when the claim s, a key written by realm,
// is not held, and its realm's events are taken here: facts on a claim of
// a realm refused here are kept aside for it (claimFact).
func (pr projector) claimHeld(tx *store.Tx, realm protocol.Realm, s string) error {
	k, err := protocol.ParseKey(protocol.KeyClaim, s)
	if err != nil {
		return nil
	}
	if k.Realm == "" {
		k.Realm = realm
	}
	return pr.claimIDHeld(tx, rid{k.Realm, k.N})
}

// claimIDHeld is claimHeld of a claim by its id.
func (pr projector) claimIDHeld(tx *store.Tx, id rid) error {
	if pr.refused(id.Realm) {
		return nil // its facts are kept aside (claimFact)
	}
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

// eventRefs are the fields of a forum event that name records: what
// Missing and Scopes read of it, whatever its type.
type eventRefs struct {
	ID        uint64   `cbor:"id"` // a board's
	Thread    string   `cbor:"thread"`
	Board     uint64   `cbor:"board,omitempty"`
	N         uint64   `cbor:"n"`
	Parent    string   `cbor:"parent,omitempty"`
	RelatesTo []string `cbor:"relates_to,omitempty"`
	Claims    []struct {
		N uint64 `cbor:"n"`
	} `cbor:"claims,omitempty"`
	Refutes []string `cbor:"refutes,omitempty"`
	Claim   string   `cbor:"claim"`
	Message string   `cbor:"message"` // a decision's reply, realm-prefixed
	CID     string   `cbor:"cid"`     // and its event
}

// refsOf decodes what names records in ev; ok is false for an event of no
// forum type.
func refsOf(ev *protocol.Event) (d eventRefs, ok bool, err error) {
	switch ev.Type {
	case evBoardCreated, evThreadOpened, evMessagePosted, evThreadState, evThreadPinned, evThreadModerat,
		evReplyAccepted, evReplyRefused, evClaimAttested, evClaimSealed:
		return d, true, protocol.DecodeDataFields(ev.Data, &d)
	}
	return d, false, nil
}

// Scopes names the forum records an event refers to or makes
// (store.Scoped): its thread, its message and claims (by key and, for what
// it makes, by its CID), the parent, relates_to and refutes it names, a
// claim it attests or seals, a board it creates, a reply it decides. A
// board's counters add up the same in any order, so a thread's board is
// none of them.
func (pr projector) Scopes(tx *store.Tx, se *store.StoredEvent) ([]string, error) {
	ev := se.Event
	realm := protocol.Realm(ev.Realm)
	d, ok, err := refsOf(ev)
	if !ok || err != nil {
		return nil, err
	}
	var out []string
	add := func(kind protocol.KeyKind, s string) {
		if s != "" {
			out = append(out, scopeOf(realm, kind, s))
		}
	}
	switch ev.Type {
	case evBoardCreated:
		out = append(out, fmt.Sprintf("pa/board/%s/%d", realm, d.ID))
	case evThreadOpened, evMessagePosted:
		out = append(out, "pa/cid/"+se.CID.String())
		add(protocol.KeyThread, d.Thread)
		add(protocol.KeyMessage, strconv.FormatUint(d.N, 10))
		add(protocol.KeyMessage, d.Parent)
		for _, c := range d.Claims {
			add(protocol.KeyClaim, strconv.FormatUint(c.N, 10))
		}
		for _, r := range d.Refutes {
			add(protocol.KeyClaim, r)
		}
		for _, r := range d.RelatesTo {
			add(refKind(r), r)
		}
	case evThreadState, evThreadPinned, evThreadModerat:
		add(protocol.KeyThread, d.Thread)
	case evReplyAccepted, evReplyRefused:
		add(protocol.KeyThread, d.Thread)
		add(protocol.KeyMessage, d.Message)
		out = append(out, "pa/cid/"+d.CID)
	case evClaimAttested, evClaimSealed:
		add(protocol.KeyClaim, d.Claim)
	}
	return out, nil
}

// scopeOf is the scope of the record key s of kind names, written by realm:
// the key with its realm ("pa/alpha:th_3"), or, when s is no such key,
// s itself in realm's words.
func scopeOf(realm protocol.Realm, kind protocol.KeyKind, s string) string {
	if kind == "" {
		return "pa/ref/" + string(realm) + "/" + s
	}
	k, err := protocol.ParseKey(kind, s)
	if err != nil {
		return "pa/ref/" + string(realm) + "/" + s
	}
	if k.Realm == "" {
		k.Realm = realm
	}
	return "pa/" + k.String()
}

// refKind is the kind of record a relates_to entry names by its prefix, or
// "" for none (a plain number names no kind).
func refKind(s string) protocol.KeyKind {
	_, local, _ := strings.Cut(s, ":")
	if local == "" {
		local = s
	}
	for _, k := range []protocol.KeyKind{protocol.KeyThread, protocol.KeyMessage, protocol.KeyClaim} {
		if strings.HasPrefix(local, string(k)+"_") {
			return k
		}
	}
	return ""
}
