package parley

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"relay/protocol"
	"relay/store"
)

// projector keeps the Parley records in step with the event log.
type projector struct {
	r        *records
	home     protocol.Realm            // this node's realm
	refusing func(protocol.Realm) bool // Config.Refusing, or nil
}

var _ store.Projector = projector{}

func (projector) Prefixes() [][]byte { return [][]byte{pfxAll} }

// ProjectionVersion changes whenever what Apply derives from an event
// changes, so that stores projected before are rebuilt (store.Versioned).
// 1: the participation and decided-reply indexes hold this realm's
// identities only. 2: a proposed reopen of a confirmed close leaves the
// thread locked, so it is not counted as waiting. 3: an attestation a
// claim's facts refuse where it falls is shown, refused. 4: another
// realm's acceptance of a reply waits for the reply (Missing), so that the
// reply joins its thread where it was accepted. 5: a refute act a claim's
// facts refuse where it falls is shown, refused. 6: a thread's last
// message was dated by the message, not by its acceptance. 7: by its
// acceptance again, the time it joined the thread, which the inbox's time
// cursor follows: a reply written before a poll and accepted after it is
// new to the next. 8: an acceptance carries the reply's effect on the
// thread, applied at once where the reply will not come (its realm is
// refused here), and the reply, should it come, only joins the thread's
// messages; facts on a claim of a realm refused here are kept aside until
// the claim comes, rather than wait for it. 9: an attestation names its
// attester's realm. 10: threads are indexed in the orders they are listed
// in (threadAtKey, boardAtKey). 11: a board's threads are no longer
// indexed apart from that order (p/pa/bt/, which nothing read). 12: who set
// a thread's state, and each entry of its history, names its realm.
func (projector) ProjectionVersion() string { return "parley/12" }

// Apply folds one event into the records. It enforces that authority stays
// home: a thread's state, pins and moderation change only by events of the
// thread's realm, and a claim is sealed only by its own realm.
func (pr projector) Apply(tx *store.Tx, se *store.StoredEvent) error {
	ev := se.Event
	p := &apply{tx: tx, r: pr.r, se: se, realm: protocol.Realm(ev.Realm), home: pr.home, seq: ev.Seq, at: ev.Time(), cid: protocol.CIDString(se.CID),
		refusing: pr.refusing}
	switch ev.Type {
	case evBoardCreated:
		var d boardData
		if err := protocol.DecodeData(ev.Data, &d); err != nil {
			return err
		}
		return p.board(d)
	case evThreadOpened, evMessagePosted:
		p.post = pr.r.take(tx) // set when this node's post authored the event
		var d messageData
		if err := protocol.DecodeData(ev.Data, &d); err != nil {
			return err
		}
		return p.message(d, ev.Type == evThreadOpened)
	case evThreadState:
		var d stateData
		if err := protocol.DecodeData(ev.Data, &d); err != nil {
			return err
		}
		return p.state(d)
	case evThreadPinned:
		var d pinData
		if err := protocol.DecodeData(ev.Data, &d); err != nil {
			return err
		}
		return p.homeThread(d.Thread, func(t *threadRec) { t.Pinned = d.Pinned })
	case evThreadModerat:
		var d moderateData
		if err := protocol.DecodeData(ev.Data, &d); err != nil {
			return err
		}
		return p.homeThread(d.Thread, func(t *threadRec) { t.NoLLM = d.LLMReplyForbidden })
	case evClaimAttested:
		var d attestData
		if err := protocol.DecodeData(ev.Data, &d); err != nil {
			return err
		}
		return p.attest(d)
	case evClaimSealed:
		var d sealData
		if err := protocol.DecodeData(ev.Data, &d); err != nil {
			return err
		}
		return p.seal(d)
	case evReplyAccepted, evReplyRefused:
		// Read leniently: a field a later version adds to decisions (as
		// effect was added) is skipped, not a broken rule that would
		// quarantine the thread's realm.
		var d decisionData
		if err := protocol.DecodeDataFields(ev.Data, &d); err != nil {
			return err
		}
		return p.decision(d, ev.Type == evReplyAccepted)
	}
	return nil // other families' events
}

// apply carries one event through the projector.
type apply struct {
	tx    *store.Tx
	r     *records
	se    *store.StoredEvent
	realm protocol.Realm
	home  protocol.Realm // this node's realm
	seq   uint64         // the event's seq in realm's chain
	at    time.Time
	cid   string
	by    string // the author when not the event's (a decision applied early)
	post  *posted
	// refusing reports the realms whose events are not taken here
	// (Config.Refusing); nil: none.
	refusing func(protocol.Realm) bool
}

func (p *apply) author() string {
	if p.by != "" {
		return p.by
	}
	return p.se.Event.Author
}

// resolve turns a key written by the event's realm into a record id: a
// bare key names the author's realm.
func (p *apply) resolve(kind protocol.KeyKind, s string) (rid, error) {
	k, err := protocol.ParseKey(kind, s)
	if err != nil {
		return rid{}, err
	}
	if k.Realm == "" {
		k.Realm = p.realm
	}
	return rid{k.Realm, k.N}, nil
}

func (p *apply) board(d boardData) error {
	b := Board{ID: d.ID, Slug: d.Slug, Name: d.Name, Description: d.Description, Realm: string(p.realm), CID: p.cid, Creator: p.author(), CreatedAt: p.at}
	p.r.changed(p.tx).setBoard(b, nil)
	return p.tx.Set(slugKey(p.realm, d.Slug), u64(d.ID))
}

func (p *apply) loadThread(id rid) (*threadRec, error) {
	if t, ok := p.r.changed(p.tx).thread(id); ok {
		return &t, nil
	}
	var t threadRec
	ok, err := p.r.threads.Get(p.tx, ridKey(pfxThread, id), &t)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("parley: thread %s:th_%d not held", id.Realm, id.N)
	}
	return &t, nil
}

// saveThread stores t and moves the board's counters by what changed since
// old (nil for a new thread). Both records are written when the op ends
// (opChanges), once however many of its events change them.
func (p *apply) saveThread(t *threadRec, old *threadRec) error {
	c := p.r.changed(p.tx)
	b, ok := c.board(t.board())
	var bk []byte
	if !ok {
		bk = ridKey(pfxBoard, t.board())
		var err error
		if ok, err = p.r.boards.Get(p.tx, bk, &b); err != nil {
			return err
		}
	}
	if ok {
		if old == nil {
			b.Threads++
		}
		b.Waiting += boolDelta(old != nil && old.waiting(), t.waiting())
		b.Open += boolDelta(old != nil && isOpen(old.State.State), isOpen(t.State.State))
		b.Messages += t.Messages - oldMessages(old)
		c.setBoard(b, bk)
	}
	c.setThread(t, old)
	return nil
}

func oldMessages(t *threadRec) int {
	if t == nil {
		return 0
	}
	return t.Messages
}

func boolDelta(was, is bool) int {
	switch {
	case was && !is:
		return -1
	case !was && is:
		return 1
	}
	return 0
}

func isOpen(s protocol.State) bool {
	return s == protocol.StateOpen || s == protocol.StateAnswered || s == protocol.StateDecided
}

func (p *apply) message(d messageData, opened bool) error {
	tid, err := p.resolve(protocol.KeyThread, d.Thread)
	if err != nil {
		return err
	}
	if opened && tid.Realm != p.realm {
		return fmt.Errorf("parley: realm %s cannot open a thread of %s", p.realm, tid.Realm)
	}
	mid := rid{p.realm, d.N}
	if p.realm != p.home { // another realm's event: what it makes must be new
		if err := p.fresh(tid, opened, mid, d); err != nil {
			return err
		}
	}
	m := messageRec{Realm: p.realm, N: d.N, CID: p.cid, Thread: tid, Kind: protocol.Act(d.Kind), Body: d.Body, Identity: p.author(),
		Extension: d.Extension, AuthorKind: d.AuthorKind, Provenance: d.Provenance, RelatesTo: d.RelatesTo, Evidence: d.Evidence,
		Image: d.Image, Awaiting: protocol.AwaitsReply(protocol.Act(d.Kind)), CreatedAt: p.at, Sequence: p.se.Sequence}
	if d.Parent != "" {
		pid, err := p.resolve(protocol.KeyMessage, d.Parent)
		if err != nil {
			return err
		}
		m.Parent = &pid
	}
	for _, c := range d.Claims {
		cid := rid{p.realm, c.N}
		m.Claims = append(m.Claims, cid)
		cl := claimRec{Realm: p.realm, N: c.N, CID: p.cid, Thread: tid, Message: mid, Statement: c.Statement, Evidence: c.Evidence,
			State: protocol.ClaimUnverified, Author: p.author(), Attestations: []attestation{}, CreatedAt: p.at, UpdatedAt: p.at}
		if p.realm != p.home {
			if err := p.foldAside(cid, &cl); err != nil {
				return err
			}
		}
		if err := putJSON(p.tx, ridKey(pfxClaim, cid), &cl); err != nil {
			return err
		}
	}
	for _, r := range d.Refutes {
		cid, err := p.resolve(protocol.KeyClaim, r)
		if err != nil {
			return err
		}
		m.Refutes = append(m.Refutes, cid)
	}
	// The event's CID names its message, or the thread it opens.
	ref := cidRef{Kind: protocol.KeyMessage, ID: mid}
	if opened {
		ref = cidRef{Kind: protocol.KeyThread, ID: tid}
	}
	if err := putJSON(p.tx, cidKey(p.se.CID), &ref); err != nil {
		return err
	}
	if !opened && tid.Realm != p.realm {
		return p.reply(&m)
	}
	var t, old *threadRec
	if opened {
		born := protocol.NewThread()
		t = &threadRec{Realm: tid.Realm, N: tid.N, CID: p.cid, Board: d.Board, Title: title(d.Body), Creator: p.author(),
			CreatedAt: p.at, State: born, Settled: born, StateAt: p.at}
	} else {
		if h := p.post; h != nil && h.read != nil && h.read.id() == tid {
			t = h.read
		} else if t, err = p.loadThread(tid); err != nil {
			return err
		}
		o := *t
		old = &o
	}
	return p.join(t, old, &m, d.Change)
}

// fresh refuses an event that names again a message, a claim or (opening
// one) a thread its realm made already: records are immutable, and other
// realms' attestations, replies and acceptances refer to them as they
// were. It also holds the envelope's own rules a replica can check alone:
// refutes only on a refute act, with evidence.
func (p *apply) fresh(tid rid, opened bool, mid rid, d messageData) error {
	var held struct{}
	if opened {
		if _, ok := p.r.changed(p.tx).thread(tid); ok {
			return fmt.Errorf("parley: realm %s opens thread th_%d again", p.realm, tid.N)
		}
		if ok, err := p.tx.GetJSON(ridKey(pfxThread, tid), &held); err != nil || ok {
			if err == nil {
				err = fmt.Errorf("parley: realm %s opens thread th_%d again", p.realm, tid.N)
			}
			return err
		}
	}
	if ok, err := p.tx.GetJSON(ridKey(pfxMessage, mid), &held); err != nil || ok {
		if err == nil {
			err = fmt.Errorf("parley: realm %s posts msg_%d again", p.realm, mid.N)
		}
		return err
	}
	for _, c := range d.Claims {
		if ok, err := p.tx.GetJSON(ridKey(pfxClaim, rid{p.realm, c.N}), &held); err != nil || ok {
			if err == nil {
				err = fmt.Errorf("parley: realm %s makes claim cl_%d again", p.realm, c.N)
			}
			return err
		}
	}
	if len(d.Refutes) > 0 && (protocol.Act(d.Kind) != protocol.ActRefute || len(d.Evidence) == 0) {
		return fmt.Errorf("parley: realm %s refutes in a %s without evidence or a refute act", p.realm, d.Kind)
	}
	return nil
}

// join puts a message into its thread: the thread's indexes, the claims it
// refutes or supersedes, the counters, and the state change its act makes.
// A local message joins when posted; a reply from another realm when the
// thread's realm accepts it.
func (p *apply) join(t, old *threadRec, m *messageRec, change *protocol.Change) error {
	if err := p.joinContent(t.id(), m, p.se.Sequence); err != nil {
		return err
	}
	return p.joinThread(t, old, m, len(m.Claims), change)
}

// joinContent puts a message among its thread's messages at sequence seq,
// with the claims it asserts, refutes or supersedes.
func (p *apply) joinContent(tid rid, m *messageRec, seq uint64) error {
	mid := rid{m.Realm, m.N}
	for i, c := range m.Claims {
		if err := p.tx.Set(ridKey(pfxThreadCl, tid, seq, uint64(i)), c.bytes()); err != nil {
			return err
		}
	}
	for _, cid := range m.Refutes {
		if err := p.claimFact(cid, claimFact{Kind: factRefute, Message: &mid}, m.Realm); err != nil {
			return err
		}
	}
	if m.Kind == protocol.ActRefine && len(m.Claims) > 0 {
		// A refine that names its author's own earlier claim supersedes it.
		for _, r := range m.RelatesTo {
			ref, err := protocol.ParseRef(r)
			if err != nil || ref.Key.Kind != protocol.KeyClaim {
				continue
			}
			k := ref.Key
			if k.Realm == "" {
				k.Realm = m.Realm
			}
			newest := m.Claims[0]
			if err := p.claimFact(rid{k.Realm, k.N}, claimFact{Kind: factSupersede, By: m.Identity, Claim: &newest}, m.Realm); err != nil && !isMissing(err) {
				return err
			}
		}
	}
	if err := p.r.heads.setAs(p.tx, ridKey(pfxMessage, mid), m, headOf(m)); err != nil {
		return err
	}
	return p.tx.Set(ridKey(pfxThreadMs, tid, seq), mid.bytes())
}

// joinThread is what a message joining thread t does to it: the author's
// part in it, its counters (claims of the message), its awaiting, its last
// message and the state change its act makes.
func (p *apply) joinThread(t, old *threadRec, m *messageRec, claims int, change *protocol.Change) error {
	tid, mid := t.id(), rid{m.Realm, m.N}
	if err := p.participate(old, m.Realm, m.Identity, tid); err != nil {
		return err
	}
	t.Messages++
	t.Claims += claims
	t.Awaiting = m.Awaiting
	t.UpdatedAt = p.at
	// When it joined the thread: another realm's reply joins when its
	// acceptance is applied, and the inbox's since finds it by that time.
	t.Last = lastMessage{N: m.N, Realm: m.Realm, Kind: m.Kind, Identity: m.Identity, Extension: m.Extension, At: p.at, Sequence: p.se.Sequence}
	if change != nil && tid.Realm == p.realm {
		if err := p.change(t, *change, "act", "", &mid); err != nil {
			return err
		}
	}
	if err := p.saveThread(t, old); err != nil {
		return err
	}
	if h := p.post; h != nil {
		h.msg, h.thread, h.ok = *m, cloneThread(*t), true
	}
	return nil
}

// participate indexes thread tid under the identity that joins a message
// to it. When the thread's last message was theirs (old is the thread
// before this message; nil for a new one) the index holds the key already,
// since join indexes every message's author: writing it again would cost
// an insert on the store's writer for nothing. In other cases the key is
// written without a read first: a read that misses the op's and the
// batch's writes goes to Badger and costs more than the write it saves.
//
// Only identities of this realm are indexed: the index serves their inbox,
// and another realm's operator is human:<name> too, often the same name.
// The message's realm says whose it is, not the event's: a reply this
// realm's agent made into another realm's thread joins it by that realm's
// decision.
func (p *apply) participate(old *threadRec, realm protocol.Realm, identity string, tid rid) error {
	if realm != p.home || old != nil && old.Messages > 0 && old.Last.Realm == realm && old.Last.Identity == identity {
		return nil
	}
	k := append(append(append(make([]byte, 0, len(pfxPart)+len(identity)+1+len(tid.Realm)+9), pfxPart...), identity...), 0)
	return p.tx.Set(tid.appendTo(k), nil)
}

// change applies a state change to t and records it in the history. The
// change is by the author of message msg, of msg's realm, when an act
// makes it (an accepted reply's author is of the reply's realm), and
// otherwise by the event's author, of the event's realm.
func (p *apply) change(t *threadRec, c protocol.Change, via, note string, msg *rid) error {
	by := p.realm
	if msg != nil {
		by = msg.Realm
	}
	h := historyRec{From: t.State.State, To: c.To, Origin: c.Origin, Confirmed: c.Confirmed, Via: via, By: p.author(), ByRealm: by,
		Message: msg, Note: note, At: p.at, CID: p.cid, Sequence: p.se.Sequence}
	t.State = t.State.Apply(c)
	if via != "confirm" { // a confirmation keeps who set the state
		t.StateBy, t.StateByRealm = p.author(), by
		t.StateAt = p.at
	}
	if c.Confirmed {
		t.Settled = t.State
		at := p.at
		t.ConfirmedAt = &at
		t.ConfirmedBy = p.author()
	} else {
		t.ConfirmedAt = nil
		t.ConfirmedBy = ""
	}
	t.UpdatedAt = p.at
	return putJSON(p.tx, ridKey(pfxHistory, t.id(), p.se.Sequence), &h)
}

func (p *apply) state(d stateData) error {
	tid, err := p.resolve(protocol.KeyThread, d.Thread)
	if err != nil {
		return err
	}
	if tid.Realm != p.realm {
		return fmt.Errorf("parley: realm %s cannot change the state of a thread of %s", p.realm, tid.Realm)
	}
	t, err := p.loadThread(tid)
	if err != nil {
		return err
	}
	old := *t
	if err := p.change(t, d.Change, d.Via, d.Note, nil); err != nil {
		return err
	}
	return p.saveThread(t, &old)
}

// homeThread changes a thread only its own realm may change.
func (p *apply) homeThread(thread string, f func(*threadRec)) error {
	tid, err := p.resolve(protocol.KeyThread, thread)
	if err != nil {
		return err
	}
	if tid.Realm != p.realm {
		return fmt.Errorf("parley: realm %s cannot moderate a thread of %s", p.realm, tid.Realm)
	}
	t, err := p.loadThread(tid)
	if err != nil {
		return err
	}
	old := *t
	f(t)
	t.UpdatedAt = p.at
	return p.saveThread(t, &old)
}

type missingError struct{ what string }

func (e missingError) Error() string { return "parley: " + e.what + " not held" }

// Unwrap makes a missing record a dependency the event waits for.
func (e missingError) Unwrap() error { return store.ErrDependency }

func isMissing(err error) bool { _, ok := err.(missingError); return ok }

// claimFact gives claim id a fact of this event, made by f.By of realm
// byRealm, and stores the claim derived again (claims.go). A supersede is
// a fact only when the refine's author wrote the claim. byRealm is the
// message's realm, not the event's: a reply joins a thread of another
// realm by that realm's decision.
func (p *apply) claimFact(id rid, f claimFact, byRealm protocol.Realm) error {
	var c claimRec
	ok, err := p.tx.GetJSON(key(pfxClaim, id.bytes()), &c)
	if err != nil {
		return err
	}
	f.At, f.CID, f.Realm, f.Seq = p.at, p.cid, p.realm, p.seq
	if !ok {
		// Missing lets another realm's event through without its claim
		// only when the claim's realm is refused here (a claim that will
		// not come, until the operator lifts that), and a rebuild replays
		// the log as it was taken, whatever is refused now. Such a fact is
		// kept aside and folded in should the claim come (foldAside),
		// rather than hold back what it came in. Otherwise the claim is
		// waited for: this realm's own decision on a reply that refutes it
		// is made again once it comes.
		// (A supersede of a claim not held is dropped, live or replayed:
		// a refine names a claim of its own author, held before it.)
		if p.tx.Replaying() && f.Kind != factSupersede || refusedBy(p.refusing, id.Realm) {
			return putJSON(p.tx, key(pfxAside, id.bytes(), u64(p.se.Sequence), []byte(f.Kind)), &asideFact{Fact: f, ByRealm: byRealm})
		}
		return missingError{fmt.Sprintf("claim %s:cl_%d", id.Realm, id.N)}
	}
	if !c.addFact(f, byRealm) {
		return nil
	}
	return putJSON(p.tx, key(pfxClaim, id.bytes()), &c)
}

// addFact adds a fact of a realm's event to the claim and reports whether
// the claim changed: a supersede counts only from the claim's author.
func (c *claimRec) addFact(f claimFact, byRealm protocol.Realm) bool {
	if f.Kind == factSupersede && !c.byAuthor(byRealm, f.By) {
		return false
	}
	return c.add(f)
}

// asideFact is a fact on a claim not held, of a realm refused here.
type asideFact struct {
	Fact    claimFact      `json:"fact"`
	ByRealm protocol.Realm `json:"by_realm"`
}

// foldAside gives claim c, just asserted and not stored yet, the facts
// kept aside for it, deleting them.
// Facts fold in their own order (claims.go), whenever they are added, so
// the claim ends as where they came after it.
func (p *apply) foldAside(id rid, c *claimRec) error {
	var keys [][]byte
	err := p.tx.Iterate(key(pfxAside, id.bytes()), false, func(k, v []byte) error {
		keys = append(keys, bytes.Clone(k))
		var a asideFact
		if err := json.Unmarshal(v, &a); err != nil {
			return err
		}
		c.addFact(a.Fact, a.ByRealm)
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := p.tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// attest keeps an attestation as a fact of the claim, whatever the claim's
// state here: the home realm refused it before it was made if its rules
// refused it there, and where it falls among the claim's facts decides
// whether it counts.
func (p *apply) attest(d attestData) error {
	id, err := p.resolve(protocol.KeyClaim, d.Claim)
	if err != nil {
		return err
	}
	return p.claimFact(id, claimFact{Kind: factAttest, By: p.author(), Verdict: d.Verdict, Extension: d.Extension,
		Evidence: d.Evidence, Note: d.Note}, p.realm)
}

func (p *apply) seal(d sealData) error {
	id, err := p.resolve(protocol.KeyClaim, d.Claim)
	if err != nil {
		return err
	}
	if id.Realm != p.realm {
		return fmt.Errorf("parley: realm %s cannot seal a claim of %s", p.realm, id.Realm)
	}
	return p.claimFact(id, claimFact{Kind: factSeal, By: p.author()}, p.realm)
}

// title is a thread's name in listings: the opening body's first line, cut
// at 120 code points.
func title(body string) string {
	line := body
	for i, r := range body {
		if r == '\n' {
			line = body[:i]
			break
		}
	}
	rs := []rune(line)
	if len(rs) > 120 {
		return string(rs[:119]) + "…"
	}
	return line
}
