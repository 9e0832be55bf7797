package parley

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"

	"relay/protocol"
	"relay/store"
)

// Replies across realms. An agent posts only at home: a reply into another
// realm's thread is its home realm's event, pending everywhere until the
// thread's realm accepts it into the thread or refuses it, in an event of
// its own. Every replica applies the decision, in whichever order the two
// events reach it.

// Event types of a thread's realm deciding on a reply from another realm.
const (
	evReplyAccepted = "federation.reply.accepted"
	evReplyRefused  = "federation.reply.refused"
)

// Status of a reply from another realm.
const (
	ReplyPending  = "pending"
	ReplyAccepted = "accepted"
	ReplyRefused  = "refused"
)

// decisionData is the thread's realm's word on a reply.
type decisionData struct {
	Thread  string           `cbor:"thread"`  // the thread, as its realm writes it
	Message string           `cbor:"message"` // the reply, realm-prefixed
	CID     string           `cbor:"cid"`     // the reply's event
	Change  *protocol.Change `cbor:"change,omitempty"`
	Reason  string           `cbor:"reason,omitempty"`
	Error   string           `cbor:"error,omitempty"`
	// Effect is what the accepted reply does to the thread, besides
	// Change: a replica that will not get the reply (its realm is blocked
	// or quarantined there) shows the thread as the thread's realm does.
	Effect *replyEffect `cbor:"effect,omitempty"`
}

// replyEffect is what an accepted reply does to its thread: the thread's
// last message, its awaiting and its counters. The reply's author is the
// decision event's.
type replyEffect struct {
	Kind      string `cbor:"kind"`
	Extension string `cbor:"extension,omitempty"`
	Claims    int    `cbor:"claims,omitempty"`
}

// check refuses an effect no thread's realm would write.
func (e *replyEffect) check() error {
	if !slices.Contains(protocol.Acts, protocol.Act(e.Kind)) || e.Claims < 0 || e.Claims > protocol.DefaultParleyLimits.ClaimsPerMessage ||
		protocol.CodePoints(e.Extension) > protocol.DefaultParleyLimits.Extension {
		return fmt.Errorf("parley: a reply's effect out of bounds: %+v", *e)
	}
	return nil
}

// decisionRec is a decision kept until its reply arrives, with what of
// the decision's own event the reply's settling needs, so that a replica
// that gets the decision first ends where one that gets it second does.
type decisionRec struct {
	Thread   rid              `json:"thread"`
	Accepted bool             `json:"accepted"`
	Change   *protocol.Change `json:"change,omitempty"`
	Reason   string           `json:"reason,omitempty"`
	Error    string           `json:"error,omitempty"`
	At       time.Time        `json:"at"`
	CID      string           `json:"cid"`
	Seq      uint64           `json:"seq"` // the decision's seq in the thread's realm's chain
	Author   string           `json:"author"`
	// Applied: the reply's effect on the thread was applied with the
	// decision, at Sequence here; the reply only joins the thread's
	// messages when it comes, in that place.
	Applied  bool   `json:"applied,omitempty"`
	Sequence uint64 `json:"sequence,omitempty"`
}

// Refusal is why a thread's realm refused a reply: the seed's reason.
type Refusal struct {
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

// earlyKey is where a decision on the reply with CID c, made by realm
// before the reply arrived, waits for it. It is kept by the deciding
// realm: a realm whose thread the reply is not in cannot take the place of
// the word that counts, the one of the reply's thread's realm.
func earlyKey(c []byte, realm protocol.Realm) []byte {
	return key(pfxDecision, c, []byte{0}, []byte(realm))
}

// reply keeps a message posted into another realm's thread: pending, or
// decided at once when the decision arrived first.
func (p *apply) reply(m *messageRec) error {
	m.Status = ReplyPending
	var dec decisionRec
	early := earlyKey(p.se.CID.Bytes(), m.Thread.Realm)
	ok, err := p.tx.GetJSON(early, &dec)
	if err != nil {
		return err
	}
	if !ok {
		return p.keepPending(m)
	}
	if err := p.tx.Delete(early); err != nil {
		return err
	}
	if dec.Thread != m.Thread {
		// A word on this reply from a realm whose thread it is not in:
		// not the thread's realm's to give. The reply waits for the real one.
		return p.keepPending(m)
	}
	// Settle as the decision's event did: its realm, seq, time and CID.
	as := *p
	as.realm, as.seq, as.at, as.cid, as.by = dec.Thread.Realm, dec.Seq, dec.At, dec.CID, dec.Author
	if dec.Applied {
		// The thread took the reply's effect with the decision, and may
		// have moved on since: the reply only joins its messages, where
		// it was accepted.
		m.Status = ReplyAccepted
		return as.joinContent(m.Thread, m, dec.Sequence)
	}
	return as.settle(m, dec)
}

// keepPending stores a reply awaiting its thread's realm, indexed under
// the thread.
func (p *apply) keepPending(m *messageRec) error {
	mid := rid{m.Realm, m.N}
	if err := p.tx.Set(key(pfxPending, m.Thread.bytes(), mid.bytes()), []byte(m.CID)); err != nil {
		return err
	}
	return putJSON(p.tx, key(pfxMessage, mid.bytes()), m)
}

// decision applies the thread's realm's word on a reply.
func (p *apply) decision(d decisionData, accepted bool) error {
	tid, err := p.resolve(protocol.KeyThread, d.Thread)
	if err != nil {
		return err
	}
	if tid.Realm != p.realm {
		return fmt.Errorf("parley: realm %s cannot decide on replies in a thread of %s", p.realm, tid.Realm)
	}
	c, err := protocol.ParseCID(d.CID)
	if err != nil {
		return err
	}
	// The thread comes before any word on it in its realm's chain.
	if _, err := p.loadThread(tid); err != nil {
		return err
	}
	dec := decisionRec{Thread: tid, Accepted: accepted, Change: d.Change, Reason: d.Reason, Error: d.Error,
		At: p.at, CID: p.cid, Seq: p.seq, Author: p.author()}
	var ref cidRef
	ok, err := p.tx.GetJSON(key(pfxCID, c.Bytes()), &ref)
	if err != nil {
		return err
	}
	if !ok {
		// The reply is on its way. The first word kept is the one that
		// counts, as it is for a reply already held.
		early := earlyKey(c.Bytes(), p.realm)
		if _, err := p.tx.Get(early); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if accepted && d.Effect != nil {
			// The reply is of a realm whose events are not taken here
			// (otherwise the acceptance would have waited for it): the
			// thread goes on as at its realm, and the reply, should it
			// come, joins its messages where it was accepted.
			if err := p.replyJoined(tid, d); err != nil {
				return err
			}
			dec.Applied, dec.Sequence = true, p.se.Sequence
		}
		return putJSON(p.tx, early, &dec)
	}
	var m messageRec
	if ok, err := p.tx.GetJSON(key(pfxMessage, ref.ID.bytes()), &m); err != nil || !ok {
		return err
	}
	if m.Status != ReplyPending || m.Thread != tid {
		return nil // decided already, or not a reply into this thread
	}
	if err := p.tx.Delete(key(pfxPending, tid.bytes(), ref.ID.bytes())); err != nil {
		return err
	}
	return p.settle(&m, dec)
}

// settle records a decided reply: into the thread, or refused with why. The
// author's inbox lists it either way, at the author's realm only: another
// realm's operator is human:<name> too, often the same name.
func (p *apply) settle(m *messageRec, dec decisionRec) error {
	mid := rid{m.Realm, m.N}
	if m.Realm == p.home {
		if err := p.tx.Set(key(pfxDecided, []byte(m.Identity), []byte{0}, u64(p.se.Sequence)), mid.bytes()); err != nil {
			return err
		}
	}
	if !dec.Accepted {
		m.Status = ReplyRefused
		m.Refusal = &Refusal{Reason: dec.Reason, Error: dec.Error}
		return putJSON(p.tx, key(pfxMessage, mid.bytes()), m)
	}
	m.Status = ReplyAccepted
	t, err := p.loadThread(m.Thread)
	if err != nil {
		return err
	}
	old := *t
	return p.join(t, &old, m, dec.Change)
}

// replyJoined applies to thread tid what the accepted reply of d does to
// it, as join does with the reply at hand.
func (p *apply) replyJoined(tid rid, d decisionData) error {
	if err := d.Effect.check(); err != nil {
		return err
	}
	mk, err := protocol.ParseKey(protocol.KeyMessage, d.Message)
	if err != nil || mk.Realm == "" {
		return fmt.Errorf("parley: a decision on %q: %v", d.Message, err)
	}
	t, err := p.loadThread(tid)
	if err != nil {
		return err
	}
	old := *t
	kind := protocol.Act(d.Effect.Kind)
	return p.joinThread(t, &old, &messageRec{Realm: mk.Realm, N: mk.N, Kind: kind, Identity: p.author(), Extension: d.Effect.Extension,
		Awaiting: protocol.AwaitsReply(kind)}, d.Effect.Claims, d.Change)
}

// decider is the thread's realm's side: it decides on every reply into one
// of its threads, under its own rules, once the reply is stored here.
type decider struct {
	s       *Service
	queue   chan cid.Cid
	mu      sync.Mutex
	waiters map[string][]chan struct{} // reply CID → posters waiting for the word
	// later holds replies whose acceptance needs a record of another realm
	// not held here yet (a claim the reply refutes); they are decided again
	// when other realms' events arrive.
	later map[cid.Cid]bool
	// retryArmed is set while a timer is to retry later (decideAgain).
	retryArmed atomic.Bool
	// foreign counts the commits that brought other realms' events (under
	// mu): a reply that failed for a missing record is queued again at
	// once when one came while it was being decided.
	foreign uint64
}

// decideAgain is how soon a reply is decided again when this realm could
// not write its decision for a passing reason.
var decideAgain = time.Second

func newDecider(s *Service) *decider {
	return &decider{s: s, queue: make(chan cid.Cid, 4096), waiters: map[string][]chan struct{}{}, later: map[cid.Cid]bool{}}
}

// committed is the store watcher: replies into this realm's threads are
// queued for a decision, and decisions wake the posters waiting on them.
func (d *decider) committed(evs []*store.StoredEvent) {
	foreign, decided := false, false
	for _, se := range evs {
		foreign = foreign || se.Event.Realm != string(d.s.realm)
		switch se.Event.Type {
		case evMessagePosted:
			if se.Event.Realm == string(d.s.realm) {
				continue
			}
			var md messageData
			if protocol.DecodeData(se.Event.Data, &md) != nil {
				continue
			}
			k, err := protocol.ParseKey(protocol.KeyThread, md.Thread)
			if err != nil || k.Realm != d.s.realm {
				continue
			}
			select {
			case d.queue <- se.CID:
			default:
				d.s.log.Warn("parley: reply queue full; decided at the next start", "cid", se.CID)
			}
		case evReplyAccepted, evReplyRefused:
			var dd decisionData
			if protocol.DecodeDataFields(se.Event.Data, &dd) == nil {
				d.wake(dd.CID)
			}
			decided = true // a reply may wait for the word on its parent
		}
	}
	if foreign || decided {
		d.retryLater()
	}
}

// retryLater queues again the replies that waited for a record of another
// realm: the events just stored may hold it.
func (d *decider) retryLater() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.foreign++
	for c := range d.later {
		select {
		case d.queue <- c:
			delete(d.later, c)
		default:
			return
		}
	}
}

func (d *decider) wake(c string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ch := range d.waiters[c] {
		close(ch)
	}
	delete(d.waiters, c)
}

// wait returns a channel closed when a decision on reply c is stored.
func (d *decider) wait(c string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	d.mu.Lock()
	d.waiters[c] = append(d.waiters[c], ch)
	d.mu.Unlock()
	return ch, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		list := d.waiters[c]
		for i, w := range list {
			if w == ch {
				d.waiters[c] = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(d.waiters[c]) == 0 {
			delete(d.waiters, c)
		}
	}
}

// run decides queued replies until ctx ends; first those left pending by
// an earlier run.
func (d *decider) run(ctx context.Context) {
	var left []cid.Cid
	prefix := key(pfxPending, []byte(d.s.realm), []byte{0})
	d.s.st.View(func(tx *store.Tx) error {
		return tx.Iterate(prefix, false, func(_, v []byte) error {
			if c, err := cid.Decode(string(v)); err == nil {
				left = append(left, c)
			}
			return nil
		})
	})
	for _, c := range left {
		d.decide(ctx, c)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-d.queue:
			d.decide(ctx, c)
		}
	}
}

// decide checks a reply against the thread as it stands here, under this
// realm's rules, and records the word in an event of this realm.
func (d *decider) decide(ctx context.Context, c cid.Cid) {
	s := d.s
	d.mu.Lock()
	foreign := d.foreign
	d.mu.Unlock()
	_, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var ref cidRef
		if ok, err := tx.GetJSON(key(pfxCID, c.Bytes()), &ref); err != nil || !ok {
			return nil, err
		}
		var m messageRec
		if ok, err := tx.GetJSON(key(pfxMessage, ref.ID.bytes()), &m); err != nil || !ok {
			return nil, err
		}
		if m.Status != ReplyPending || m.Thread.Realm != s.realm {
			return nil, nil
		}
		var t threadRec
		if ok, err := tx.GetJSON(key(pfxThread, m.Thread.bytes()), &t); err != nil || !ok {
			return nil, err
		}
		dd := decisionData{Thread: s.keyString(protocol.KeyThread, m.Thread), Message: rid{m.Realm, m.N}.String(), CID: c.String()}
		ref2, err := s.judge(tx, &t, &m)
		if err != nil {
			return nil, err
		}
		if ref2 == nil {
			change, r := protocol.ActChange(t.State, m.Kind, protocol.StandingNone)
			dd.Change, ref2 = change, r
			dd.Effect = &replyEffect{Kind: string(m.Kind), Extension: m.Extension, Claims: len(m.Claims)}
		}
		typ := evReplyAccepted
		if ref2 != nil {
			typ = evReplyRefused
			dd.Reason, dd.Error = string(ref2.Reason), ref2.Message
		}
		data, err := protocol.EncodeData(dd)
		if err != nil {
			return nil, err
		}
		return &protocol.Draft{Type: typ, Author: m.Identity, Data: data}, nil
	})
	switch {
	case errors.Is(err, store.ErrDependency):
		// Accepted, it would refute a claim not held here yet: it is
		// decided again once other realms' events come.
		d.mu.Lock()
		queued := false
		if d.foreign != foreign {
			// Other realms' events came while it was decided, and their
			// retry may have passed it by: it goes again now.
			select {
			case d.queue <- c:
				queued = true
			default:
			}
		}
		if !queued {
			d.later[c] = true
		}
		d.mu.Unlock()
		s.log.Debug("parley: a reply waits for a record to be decided", "cid", c, "err", err)
	case errors.Is(err, store.ErrAuthoringHeld), errors.Is(err, store.ErrDiskFull):
		// This realm may not write now (its chain is being brought level,
		// its disk is full): decided again in a moment.
		d.mu.Lock()
		d.later[c] = true
		d.mu.Unlock()
		if d.retryArmed.CompareAndSwap(false, true) { // one timer for all of them
			time.AfterFunc(decideAgain, func() {
				d.retryArmed.Store(false)
				d.retryLater()
			})
		}
		s.log.Debug("parley: a reply is decided again shortly", "cid", c, "err", err)
	case err != nil && ctx.Err() == nil:
		s.log.Warn("parley: deciding a reply from another realm", "cid", c, "err", err)
	}
}

// judge applies this realm's rules for a reply into one of its threads, as
// it applies them to its own agents' posts: closed threads, a thread that
// forbids models' replies, the body limit, a refuted claim that is
// superseded or in such a thread, and what is in no thread here (a
// parent, or a refuted claim's reply, that was refused: the replier's realm
// may not have known yet). A parent, or a refuted claim's reply into one of
// this realm's threads, not decided yet is waited for (a dependency,
// decided again later), so that this realm's word does not hang on which
// came first; another realm's word on a claim's reply is taken as held
// now, since it may never come here.
func (s *Service) judge(tx *store.Tx, t *threadRec, m *messageRec) (*protocol.Refusal, error) {
	switch {
	case refusedBy(s.cfg.Refusing, m.Realm):
		// Held before this node stopped taking the realm's events.
		return s.blockedRefusal(m.Realm), nil
	case t.locked():
		return t.closedRefusal(), nil
	case t.NoLLM && m.AuthorKind != protocol.OriginUser:
		return protocol.Refuse(protocol.ReasonLLMReplyForbidden), nil
	case protocol.CodePoints(m.Body) > s.cfg.Limits.Body:
		return protocol.Refusef(protocol.ReasonInvalidBody, "body: at most %d characters here.", s.cfg.Limits.Body).With("field", "body").With("rule", "max_length"), nil
	}
	if m.Parent != nil {
		st, why, err := s.replyStanding(tx, *m.Parent, t.id())
		switch {
		case err != nil:
			return nil, err
		case st == ReplyRefused:
			return notInThread(protocol.ReasonParentNotFound, "Its parent "+s.keyString(protocol.KeyMessage, *m.Parent), t.id(), why).With("field", "parent"), nil
		}
	}
	for _, id := range m.Refutes {
		var cl claimRec
		ok, err := tx.GetJSON(key(pfxClaim, id.bytes()), &cl)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // of a realm refused here (Missing waits for the others)
		}
		st, why, err := s.replyStanding(tx, cl.Message, cl.Thread)
		switch {
		case err != nil:
			return nil, err
		case st == ReplyRefused:
			return notInThread(protocol.ReasonClaimNotFound, "The claim it refutes, "+s.keyString(protocol.KeyClaim, id)+",", cl.Thread, why).With("field", "refutes"), nil
		}
		// The rules a refute posted here meets (post.go): no AI reaction in
		// a thread that forbids them, no refutation of a superseded claim.
		if m.AuthorKind != protocol.OriginUser {
			var ct threadRec
			if ok, err := tx.GetJSON(key(pfxThread, cl.Thread.bytes()), &ct); err != nil {
				return nil, err
			} else if ok && ct.NoLLM {
				return protocol.Refusef(protocol.ReasonLLMReplyForbidden, "The human forbade AI reactions in the thread of claim %s, refutations included.",
					s.keyString(protocol.KeyClaim, id)).With("field", "refutes"), nil
			}
		}
		if _, ref := protocol.ClaimRefute(cl.State); ref != nil {
			return ref.With("field", "refutes"), nil
		}
	}
	return nil, nil
}

// blockedRefusal refuses a reply of realm r, whose events this node takes
// no more: its operator blocked that realm, or quarantined it for
// equivocation. The seed has no reason of its own for it: forbidden, the
// generic refusal, with an error that says why.
func (s *Service) blockedRefusal(r protocol.Realm) *protocol.Refusal {
	return protocol.Refusef(protocol.ReasonForbidden, "Realm %s takes no replies from realm %s: it takes none of that realm's events (blocked or quarantined).", s.realm, r)
}

// BlockedEvent is shown an event of a realm this realm's operator blocked,
// which this node does not take (federation.Config.BlockedEvent). A reply
// of that realm into one of this realm's threads is never held here, so
// the decider never sees it; without a word from this realm every replica
// that holds it, its author's realm included, would show it pending for
// good. So it is refused here, by the block, in an event of this realm as
// any decision is: every replica applies it whichever of the two it gets
// first, and this node keeps the refusal for the reply should the block be
// lifted and the reply come. A reply decided already is left as it is.
// An error says the refusal was not written: the event is to be shown
// again.
func (s *Service) BlockedEvent(ctx context.Context, ev *protocol.Event, c cid.Cid) error {
	if ev.Type != evMessagePosted {
		return nil
	}
	var md messageData
	if protocol.DecodeData(ev.Data, &md) != nil {
		return nil
	}
	k, err := protocol.ParseKey(protocol.KeyThread, md.Thread)
	if err != nil || k.Realm != s.realm {
		return nil
	}
	realm, tid := protocol.Realm(ev.Realm), rid{s.realm, k.N}
	_, err = s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) {
		var t threadRec
		if ok, err := tx.GetJSON(key(pfxThread, tid.bytes()), &t); err != nil || !ok {
			return nil, err
		}
		// Held (the decider's), or decided before it came.
		for _, k := range [][]byte{key(pfxCID, c.Bytes()), earlyKey(c.Bytes(), s.realm)} {
			if _, err := tx.Get(k); err == nil {
				return nil, nil
			} else if !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
		}
		ref := s.blockedRefusal(realm)
		data, err := protocol.EncodeData(decisionData{Thread: s.keyString(protocol.KeyThread, tid), Message: rid{realm, md.N}.String(), CID: c.String(),
			Reason: string(ref.Reason), Error: ref.Message})
		if err != nil {
			return nil, err
		}
		return &protocol.Draft{Type: evReplyRefused, Author: ev.Author, Data: data}, nil
	})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("parley: refusing a reply from a blocked realm", "realm", realm, "cid", c, "err", err)
	}
	return err
}

// replyStanding is replyOutcome for a record a reply names in a thread of
// this realm: a missingError while it is a reply not held yet, or held and
// not decided, unless a realm it waits on is refused here (its word will
// not come). Only this realm's own word is waited for: in another realm's
// thread it is replyOutcome, since that realm's word may never come here
// (it may not hold the reply, or be gone).
func (s *Service) replyStanding(tx *store.Tx, id, thread rid) (string, *Refusal, error) {
	if thread.Realm != s.realm {
		return s.replyOutcome(tx, id, thread)
	}
	if id.Realm == thread.Realm {
		return "", nil, nil
	}
	refused := func(r protocol.Realm) bool { return refusedBy(s.cfg.Refusing, r) }
	var m messageRec
	ok, err := tx.GetJSON(key(pfxMessage, id.bytes()), &m)
	switch {
	case err != nil:
		return "", nil, err
	case !ok && !refused(id.Realm):
		return "", nil, missingError{fmt.Sprintf("message %s:msg_%d", id.Realm, id.N)}
	case ok && m.Status == ReplyPending && !refused(thread.Realm) && !refused(id.Realm):
		return "", nil, missingError{fmt.Sprintf("the decision on message %s:msg_%d", id.Realm, id.N)}
	}
	return m.Status, m.Refusal, nil
}

// awaitDecision waits up to d for the thread's realm's word on the reply
// with CID c, and says whether it came.
func (s *Service) awaitDecision(ctx context.Context, c string, d time.Duration) bool {
	ch, cancel := s.decider.wait(c)
	defer cancel()
	// The word may have come before the wait began.
	if st, _ := s.replyStatus(c); st != ReplyPending {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// replyOutcome is the status of message id, and why it was refused, when
// it is a reply from another realm into thread; "" for a message of the
// thread's own realm, which joins it when posted.
func (s *Service) replyOutcome(tx *store.Tx, id, thread rid) (string, *Refusal, error) {
	if id.Realm == thread.Realm {
		return "", nil, nil
	}
	var m messageRec
	if _, err := tx.GetJSON(key(pfxMessage, id.bytes()), &m); err != nil {
		return "", nil, err
	}
	return m.Status, m.Refusal, nil
}

// notInThread refuses an act on a record of a reply its thread's realm
// refused: what it asserted never joined the thread.
func notInThread(reason protocol.Reason, what string, thread rid, ref *Refusal) *protocol.Refusal {
	why := "refused"
	if ref != nil && ref.Reason != "" {
		why = ref.Reason
	}
	return protocol.Refusef(reason, "%s is in no thread: realm %s refused the reply it came in (%s).", what, thread.Realm, why)
}

// replyStatus is the status of the message whose event is c.
func (s *Service) replyStatus(c string) (string, error) {
	pc, err := protocol.ParseCID(c)
	if err != nil {
		return "", err
	}
	var status string
	err = s.st.View(func(tx *store.Tx) error {
		var ref cidRef
		ok, err := tx.GetJSON(key(pfxCID, pc.Bytes()), &ref)
		if err != nil || !ok {
			return err
		}
		var m messageRec
		if _, err := tx.GetJSON(key(pfxMessage, ref.ID.bytes()), &m); err != nil {
			return err
		}
		status = m.Status
		return nil
	})
	return status, err
}
