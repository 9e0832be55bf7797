package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// Parking. An event of another realm may refer to a record this node does
// not hold: a claim it attests, a conversation it appends to, messages it
// relates. The record may be on its way, or never come (its realm is
// blocked or quarantined here). Were the event refused until then, its
// realm's chain would stop there: not stored, not served, fetched again and
// again. So the event is parked instead: stored in its realm's chain (the
// head moves on, the node serves it to peers), but not projected and given
// no node sequence; the realm's later events are parked behind it, since
// projectors fold a realm's events in its chain's order. When a later
// commit brings events of other realms, the store tries the parked events
// again, in the order they were parked, and projects each one whose records
// have arrived at the next node sequence, as if it arrived then: arrival
// order (e/n/) stays an order in which every event's records come before
// it, and each realm's events in chain order, so Rebuild replays it as it
// was, and an export (EachChained) is in arrival order but for the events
// still parked, which come last.
//
// A later event of the realm waits behind a parked one only when it touches
// what that one touches: projectors that are Scoped name, for each event,
// the records it refers to or makes, and an event sharing none of them with
// its realm's parked events is projected past them, as nothing it does
// depends on theirs or changes what they will do. Every replica then ends
// the same whichever of the two it projects first. An event whose scopes a
// projector cannot name shares every scope ("*").
//
//	x/pk/<n 8 BE> → parked at (unix ms, 8 BE) ‖ place length (uvarint) ‖ place ‖ why
//	x/pq/<n 8 BE> → the parked event's scopes, each a uvarint length ‖ bytes
//	x/ps/<realm> 0x00 <scope> → how many of the realm's parked events have it (8 BE)

// Dependent is a projector that can tell, by reads alone, whether an event
// refers to a record not held yet. Missing returns nil when Apply may run,
// an error wrapping ErrDependency that names the record when it may not,
// and any other error when it cannot tell. A dependency Missing overlooks
// still fails the event's op when Apply meets it: the event then waits, as
// without parking.
type Dependent interface {
	Missing(tx *Tx, se *StoredEvent) error
}

// Scoped is a projector that names, by reads alone, the records an event
// refers to or makes: its scopes, strings in the projector's own words and
// prefixed with its own name, so that two projectors' never meet. Two
// events of one realm that share no scope of any projector commute: each
// projects the same whichever comes first. nil with no error: the event
// touches nothing of this projector's. An error: it cannot tell, and the
// event counts as sharing every scope. A projector that is not Scoped
// counts so for every event.
type Scoped interface {
	Scopes(tx *Tx, se *StoredEvent) ([]string, error)
}

// scopeAll is the scope every scope meets.
const scopeAll = "*"

var (
	prefixParked       = []byte("x/pk/")
	prefixRefused      = []byte("x/pr/") // parked, its records held, and refused by a projector
	keyRefusedTried    = []byte("x/prv") // the projector versions that last tried the refused events
	prefixParkedScopes = []byte("x/pq/")
	prefixScopeCount   = []byte("x/ps/")
)

// scopesOf names the scopes of se: those of every projector, or just
// scopeAll when one cannot tell.
func scopesOf(tx *Tx, projectors []Projector, se *StoredEvent) []string {
	var out []string
	for _, p := range projectors {
		sc, ok := p.(Scoped)
		if !ok {
			return []string{scopeAll}
		}
		s, err := sc.Scopes(tx, se)
		if err != nil {
			return []string{scopeAll}
		}
		for _, x := range s {
			if x == scopeAll {
				return []string{scopeAll}
			}
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	return out
}

func scopeCountKey(realm, scope string) []byte {
	return join(prefixScopeCount, []byte(realm), []byte{0}, []byte(scope))
}

func encodeScopes(scopes []string) []byte {
	var b []byte
	for _, s := range scopes {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func decodeScopes(b []byte) ([]string, error) {
	var out []string
	for len(b) > 0 {
		l, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < l {
			return nil, errors.New("store: corrupt parked scopes")
		}
		out = append(out, string(b[w:w+int(l)]))
		b = b[w+int(l):]
	}
	return out, nil
}

// parkedScopes returns the scopes of parked event n, and whether they were
// recorded: every scope when none were (an event parked before scopes).
func (tx *Tx) parkedScopes(n uint64) (scopes []string, recorded bool, err error) {
	v, err := tx.Get(join(prefixParkedScopes, u64(n)))
	if errors.Is(err, ErrNotFound) {
		return []string{scopeAll}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	scopes, err = decodeScopes(v)
	return scopes, true, err
}

// countScope adds d to the count of realm's parked events with scope.
func (tx *Tx) countScope(realm, scope string, d int64) error {
	k := scopeCountKey(realm, scope)
	var n int64
	switch v, err := tx.Get(k); {
	case err == nil && len(v) == 8:
		n = int64(binary.BigEndian.Uint64(v))
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	if n += d; n <= 0 {
		tx.del(k)
	} else {
		tx.put(k, u64(uint64(n)))
	}
	return nil
}

// holdScopes records the scopes of parked event n of realm.
func (tx *Tx) holdScopes(realm string, n uint64, scopes []string) error {
	tx.put(join(prefixParkedScopes, u64(n)), encodeScopes(scopes))
	for _, s := range scopes {
		if err := tx.countScope(realm, s, 1); err != nil {
			return err
		}
	}
	return nil
}

// releaseScopes forgets the scopes of parked event n of realm, which is
// projected or refused: it no longer holds back what shares them.
func (tx *Tx) releaseScopes(realm string, n uint64) error {
	scopes, recorded, err := tx.parkedScopes(n)
	if err != nil || !recorded {
		return err // none recorded, none counted
	}
	return tx.forgetScopes(realm, n, scopes)
}

// forgetScopes removes the recorded scopes of parked event n of realm and
// their counts.
func (tx *Tx) forgetScopes(realm string, n uint64, scopes []string) error {
	tx.del(join(prefixParkedScopes, u64(n)))
	for _, s := range scopes {
		if err := tx.countScope(realm, s, -1); err != nil {
			return err
		}
	}
	return nil
}

// behind reports whether an event of realm with scopes shares one with a
// parked event of its realm; the caller knows some are parked.
func (tx *Tx) behind(realm string, scopes []string) (bool, error) {
	if slices.Contains(scopes, scopeAll) {
		return true, nil // it meets every scope
	}
	for _, s := range append([]string{scopeAll}, scopes...) {
		switch _, err := tx.Get(scopeCountKey(realm, s)); {
		case err == nil:
			return true, nil
		case !errors.Is(err, ErrNotFound):
			return false, err
		}
	}
	return false, nil
}

// parkCounter numbers parked events (Tx.NextID), in parking order.
const parkCounter = "store/parked"

func parkedKey(n uint64) []byte { return join(prefixParked, u64(n)) }

// ParkedEvent is an event held in its realm's chain but not yet projected.
type ParkedEvent struct {
	Realm protocol.Realm
	Seq   uint64
	At    time.Time // when it was parked
	Why   string    // the record it waits for, or why it was refused
	// Refused: its records arrived and a projector refused it (it broke a
	// rule of the log); it stays in its chain, never projected.
	Refused bool
	n       uint64
	place   []byte
}

func encodeParked(at time.Time, place []byte, why string) []byte {
	b := u64(uint64(at.UnixMilli()))
	b = binary.AppendUvarint(b, uint64(len(place)))
	b = append(b, place...)
	return append(b, why...)
}

func decodeParked(k, v []byte) (ParkedEvent, error) {
	bad := errors.New("store: corrupt parked event")
	if len(k) != len(prefixParked)+8 || len(v) < 8 {
		return ParkedEvent{}, bad
	}
	p := ParkedEvent{n: binary.BigEndian.Uint64(k[len(prefixParked):]), At: time.UnixMilli(int64(binary.BigEndian.Uint64(v))).UTC(),
		Refused: bytes.HasPrefix(k, prefixRefused)}
	l, w := binary.Uvarint(v[8:])
	if w <= 0 || uint64(len(v)-8-w) < l {
		return ParkedEvent{}, bad
	}
	p.place = v[8+w : 8+w+int(l)]
	p.Why = string(v[8+w+int(l):])
	realm, seq, err := splitPlace(p.place)
	if err != nil {
		return ParkedEvent{}, err
	}
	p.Realm, p.Seq = protocol.Realm(realm), seq
	return p, nil
}

// splitPlace returns the realm and seq of an event's place.
func splitPlace(place []byte) (string, uint64, error) {
	if len(place) < 10 || place[len(place)-9] != 0 {
		return "", 0, errors.New("store: corrupt event place")
	}
	return string(place[:len(place)-9]), binary.BigEndian.Uint64(place[len(place)-8:]), nil
}

// missing asks every Dependent projector whether se may be projected now:
// nil, an error wrapping ErrDependency, or a fault (one could not tell).
func missing(tx *Tx, projectors []Projector, se *StoredEvent) error {
	for _, p := range projectors {
		if d, ok := p.(Dependent); ok {
			if err := d.Missing(tx, se); errors.Is(err, ErrDependency) {
				return err
			} else if err != nil {
				return fmt.Errorf("%w: %w", errFault, err)
			}
		}
	}
	return nil
}

// ingestEvent stores a checked event of the log: projected at the next
// node sequence, or parked when a record it refers to is not held.
//
// A realm's events are projected in the order of its chain, as projectors
// expect (a thread's state follows its realm's events in order): while an
// earlier event of the realm waits, a later one waits behind it.
func (tx *Tx) ingestEvent(ev *protocol.Event, c cid.Cid, raw []byte) (*StoredEvent, error) {
	if err := protocol.CheckAuthor(ev); err != nil { // refused, not parked
		return nil, err
	}
	se := &StoredEvent{Event: ev, CID: c, Raw: raw}
	var scopes []string
	if n := tx.waiting(ev.Realm); n > 0 {
		scopes = scopesOf(tx, tx.b.projectors, se)
		switch behind, err := tx.behind(ev.Realm, scopes); {
		case err != nil:
			return nil, err
		case behind:
			return se, tx.park(se, prefixParked, scopes, fmt.Sprintf("after an earlier event of %s not shown yet that touches what it touches", ev.Realm))
		}
	}
	err := missing(tx, tx.b.projectors, se)
	if err == nil {
		return tx.appendEvent(ev, c, raw)
	}
	if !errors.Is(err, ErrDependency) {
		return nil, err
	}
	if scopes == nil {
		scopes = scopesOf(tx, tx.b.projectors, se)
	}
	return se, tx.park(se, prefixParked, scopes, err.Error())
}

// waiting is how many events of realm wait parked, as the op sees it.
func (tx *Tx) waiting(realm string) int { return tx.c.waiting[realm] + tx.waitDelta[realm] }

func (tx *Tx) addWaiting(realm string, d int) {
	if tx.waitDelta == nil {
		tx.waitDelta = make(map[string]int, 1)
	}
	tx.waitDelta[realm] += d
}

// park links se into its realm's chain without projecting it, and records
// it under pre (x/pk/, or x/pr/ for one a projector refused) with why; one
// that waits (x/pk/) holds back its realm's later events that share one of
// its scopes.
func (tx *Tx) park(se *StoredEvent, pre []byte, scopes []string, why string) error {
	key := tx.link(se.Event, se.CID)
	tx.put(key, encodeEventRecord(0, se.CID.Bytes(), se.Raw))
	n, err := tx.NextID(parkCounter)
	if err != nil {
		return err
	}
	tx.put(join(pre, u64(n)), encodeParked(tx.s.cfg.Now(), eventPlace(key), why))
	tx.parked++
	if bytes.Equal(pre, prefixParked) {
		tx.addWaiting(se.Event.Realm, 1)
		return tx.holdScopes(se.Event.Realm, n, scopes)
	}
	return nil
}

// unpark projects the parked event p if nothing it refers to is missing any
// more; otherwise the op fails with an error wrapping ErrDependency.
func (tx *Tx) unpark(p ParkedEvent) (*StoredEvent, error) {
	if _, err := tx.Get(parkedKey(p.n)); errors.Is(err, ErrNotFound) {
		return nil, nil // projected or refused meanwhile
	} else if err != nil {
		return nil, err
	}
	key := placeKey(p.place)
	v, err := tx.Get(key)
	if err != nil {
		return nil, err
	}
	se, err := decodeEventRecord(v)
	if err != nil {
		return nil, err
	}
	done := se.Sequence != 0 // projected meanwhile: only its parking record goes
	if !done {
		if err := missing(tx, tx.b.projectors, se); errors.Is(err, ErrDependency) {
			return nil, waits{err}
		} else if err != nil {
			return nil, err
		}
	}
	tx.del(parkedKey(p.n))
	tx.addWaiting(string(p.Realm), -1)
	if err := tx.releaseScopes(string(p.Realm), p.n); err != nil {
		return nil, err
	}
	if done {
		return nil, nil
	}
	tx.seq++
	se.Sequence = tx.seq
	return se, tx.project(se, key)
}

// waits is unpark's ErrDependency from Missing, before it wrote anything:
// the event still waits. One that Apply meets fails the op instead.
type waits struct{ err error }

func (w waits) Error() string { return w.err.Error() }
func (w waits) Unwrap() error { return w.err }

// unparkRun projects the parked events ps of one realm, in order, up to the
// first that still waits; it returns how many it took off the parked list.
func (tx *Tx) unparkRun(ps []ParkedEvent) (int, error) {
	for i, p := range ps {
		var w waits
		if _, err := tx.unpark(p); errors.As(err, &w) {
			return i, nil
		} else if err != nil {
			return i, err
		}
	}
	return len(ps), nil
}

// ParkedCounts returns how many events of each realm wait parked (not
// refused), as committed.
func (s *Store) ParkedCounts() map[protocol.Realm]int {
	s.headsMu.RLock()
	defer s.headsMu.RUnlock()
	out := make(map[protocol.Realm]int, len(s.parkedN))
	for r, n := range s.parkedN {
		out[protocol.Realm(r)] = n
	}
	return out
}

// FirstParked returns, for each realm of realms, the first of its events
// still parked (not refused) and the first refused, reading at most budget
// parked events of each kind in parking order: a realm whose first one
// lies beyond is left out.
func (s *Store) FirstParked(realms map[protocol.Realm]bool, budget int) (parked, refused map[protocol.Realm]ParkedEvent, err error) {
	parked, refused = map[protocol.Realm]ParkedEvent{}, map[protocol.Realm]ParkedEvent{}
	err = s.View(func(tx *Tx) error {
		for _, pre := range [][]byte{prefixParked, prefixRefused} {
			first, read := parked, 0
			if bytes.Equal(pre, prefixRefused) {
				first = refused
			}
			err := tx.Iterate(pre, false, func(k, v []byte) error {
				if read++; read > budget {
					return ErrStop
				}
				p, err := decodeParked(k, v)
				if err != nil {
					return err
				}
				if _, ok := first[p.Realm]; !ok && realms[p.Realm] {
					first[p.Realm] = p
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return parked, refused, err
}

// ParkedEvents returns up to limit parked events (all when limit ≤ 0): those
// waiting, in the order they were parked, then those refused.
func (s *Store) ParkedEvents(limit int) ([]ParkedEvent, error) {
	var out []ParkedEvent
	err := s.View(func(tx *Tx) error {
		for _, pre := range [][]byte{prefixParked, prefixRefused} {
			err := tx.Iterate(pre, false, func(k, v []byte) error {
				p, err := decodeParked(k, v)
				if err != nil {
					return err
				}
				out = append(out, p)
				if limit > 0 && len(out) >= limit {
					return ErrStop
				}
				return nil
			})
			if err != nil || (limit > 0 && len(out) >= limit) {
				return err
			}
		}
		return nil
	})
	return out, err
}

// scopeParked names the scopes of parked events with the projectors now
// registered: of those parked before parking had scopes (x/pk/ without
// x/pq/), and, when again is set (the projectors' versions changed, so
// what they name may have too), of every parked event. It works in ops of
// scopeChunk events, each taking up after the last, so that any number of
// parked events fits; one cut short leaves each event with its old scopes
// or its new ones, and the next start goes on.
func (s *Store) scopeParked(ctx context.Context, again bool) error {
	if s.parkGen.Load() == s.parkedNone.Load() {
		return nil // nothing parked: no read at start-up
	}
	var from []byte
	for {
		var next []byte
		_, err := s.do(ctx, &op{run: func(tx *Tx) (*StoredEvent, error) {
			next = nil
			done := 0
			err := tx.IterateFrom(prefixParked, from, func(k, v []byte) error {
				if done == scopeChunk {
					next = k
					return ErrStop
				}
				done++
				p, err := decodeParked(k, v)
				if err != nil {
					return err
				}
				switch old, recorded, err := tx.parkedScopes(p.n); {
				case err != nil:
					return err
				case recorded && !again:
					return nil
				case recorded:
					if err := tx.forgetScopes(string(p.Realm), p.n, old); err != nil {
						return err
					}
				}
				se, err := tx.eventAt(placeKey(p.place))
				if err != nil {
					return err
				}
				return tx.holdScopes(string(p.Realm), p.n, scopesOf(tx, tx.b.projectors, se))
			})
			return nil, err
		}})
		if err != nil || next == nil {
			return err
		}
		from = next
	}
}

// retryRefused puts the parked events a projector refused back among those
// that wait, in their parking order, once the projectors' versions differ
// from those that last tried them (x/prv): a refusal that was a
// projector's fault does not keep an event of the log out of the
// projections for good. It works in ops of scopeChunk events and records
// the versions in the last, so that a stop part-way leaves the rest to the
// next start. Each goes back without scopes; scopeParked names them. One
// refused again is recorded so again, and the refusal hooks are told again.
//
// An event stays refused when an event of its realm after it, already
// projected, shares a scope with it (or when there are more such events
// than retryScan to look at): the two do not commute, and projecting it
// now, after that one, would end in a state no replica that projected
// them in chain order has.
func (s *Store) retryRefused(ctx context.Context, versions []byte) error {
	var from []byte
	for {
		var next []byte
		moved, kept := 0, 0
		_, err := s.do(ctx, &op{run: func(tx *Tx) (*StoredEvent, error) {
			next, moved, kept = nil, 0, 0
			looked := 0 // later events read, which bounds the op's time too
			if from == nil {
				switch v, err := tx.Get(keyRefusedTried); {
				case err == nil && bytes.Equal(v, versions):
					return nil, nil
				case err != nil && !errors.Is(err, ErrNotFound):
					return nil, err
				}
			}
			err := tx.IterateFrom(prefixRefused, from, func(k, v []byte) error {
				if moved+kept == scopeChunk || looked >= retryBudget {
					next = bytes.Clone(k)
					return ErrStop
				}
				p, err := decodeParked(k, v)
				if err != nil {
					return err
				}
				ok, n, err := tx.commutesWithLater(p)
				looked += n
				switch {
				case err != nil:
					return err
				case !ok:
					kept++
					return nil
				}
				tx.del(k)
				tx.put(parkedKey(p.n), v)
				tx.addWaiting(string(p.Realm), 1)
				tx.parked++
				moved++
				return nil
			})
			if err == nil && next == nil {
				tx.put(keyRefusedTried, versions)
			}
			return nil, err
		}})
		if err != nil {
			return fmt.Errorf("store: retrying refused events: %w", err)
		}
		if moved > 0 || kept > 0 {
			s.log.Info("store: events a projector refused are tried again with the projectors of this version",
				"events", moved, "kept_refused", kept)
		}
		if next == nil {
			return nil
		}
		from = next
	}
}

// retryScan is how many later events of its realm retryRefused looks at
// for one refused event, and retryBudget how many one of its ops reads.
const (
	retryScan   = 4096
	retryBudget = 65536
)

// commutesWithLater reports whether the refused event p shares no scope,
// as the projectors name them now, with any event of its realm after it
// that is projected, and how many of those it read.
func (tx *Tx) commutesWithLater(p ParkedEvent) (bool, int, error) {
	se, err := tx.eventAt(placeKey(p.place))
	if err != nil {
		return false, 0, err
	}
	mine := scopesOf(tx, tx.b.projectors, se)
	realm := string(p.Realm)
	head := tx.head(realm).Seq
	if head-p.Seq > retryScan {
		return false, 0, nil
	}
	n := 0
	for seq := p.Seq + 1; seq <= head; seq++ {
		later, err := tx.eventAt(eventKey(realm, seq))
		if err != nil {
			return false, n, err
		}
		n++
		if later.Sequence != 0 && meets(mine, scopesOf(tx, tx.b.projectors, later)) {
			return false, n, nil
		}
	}
	return true, n, nil
}

// meets reports whether two events' scopes share one; scopeAll meets
// every event.
func meets(a, b []string) bool {
	if slices.Contains(a, scopeAll) || slices.Contains(b, scopeAll) {
		return true
	}
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// scopeChunk is how many parked events one op of scopeParked takes.
const scopeChunk = 2048

// wakeUnpark asks the unpark loop for a pass, if anything may be parked.
func (s *Store) wakeUnpark() {
	if !s.projectorsSet.Load() || s.parkGen.Load() == s.parkedNone.Load() {
		return
	}
	select {
	case s.unparkWake <- struct{}{}:
	default:
	}
}

// unparkLoop tries the parked events again whenever a commit brought
// events of other realms (done), until Close.
func (s *Store) unparkLoop() {
	defer close(s.unparkDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		// A parked event that faulted is due again at a time of its own,
		// whatever arrives meanwhile.
		var due <-chan time.Time
		var timer *time.Timer
		if at, ok := s.faultDue(); ok {
			timer = time.NewTimer(time.Until(at))
			due = timer.C
		}
		select {
		case <-s.stop:
			return
		case <-s.unparkWake:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		// Commits meanwhile ask for one more pass, not one each. A pass
		// is followed by a rest that keeps the passes to a share of the
		// time, whether it projected anything or not (events parked for
		// good, their realm blocked, while other realms' events keep
		// coming; or a few projected at a time from many parked): a few
		// parked events cost a pass every few milliseconds at most, many
		// a pass every so often, and a record that arrives is projected
		// after about that rest, not after a fixed backoff.
		start := time.Now()
		s.unparkPass(ctx)
		rest := unparkRest(time.Since(start))
		select {
		case <-s.stop:
			return
		case <-time.After(rest):
		}
	}
}

// faultDue returns the earliest time a parked event that faulted is due to
// be tried again, if one is still to come.
func (s *Store) faultDue() (time.Time, bool) {
	s.unparkMu.Lock()
	defer s.unparkMu.Unlock()
	var at time.Time
	now := time.Now()
	for _, f := range s.unparkFaults {
		if f.until.After(now) && (at.IsZero() || f.until.Before(at)) {
			at = f.until
		}
	}
	return at, !at.IsZero()
}

// unparkRest is the rest after a pass over the parked events that took d:
// passes then take at most 1/unparkShare of the time, and follow each
// other no sooner than unparkMin.
func unparkRest(d time.Duration) time.Duration {
	return max(unparkMin, unparkShare*d)
}

const (
	unparkMin   = 5 * time.Millisecond
	unparkShare = 20
)

// Unpark projects, before it returns, every parked event whose records are
// held now (the pass the store otherwise makes in the background after
// commits). An import makes one before it closes the store, and
// EnsureProjections before a node serves, so that no event of the node's
// own realm waits for a pass when its numbering resumes.
func (s *Store) Unpark(ctx context.Context) {
	if s.projectorsSet.Load() && s.parkGen.Load() != s.parkedNone.Load() {
		s.unparkPass(ctx)
	}
}

// warnOwnParked says loudly when events of the node's own realm wait parked
// (only an import can park them): the events the node authors are projected
// at once, so its own realm's order no longer holds until they are.
func (s *Store) warnOwnParked() {
	if s.parkGen.Load() == s.parkedNone.Load() {
		return // nothing parked: no read at start-up
	}
	parked, err := s.ParkedEvents(0)
	if err != nil {
		return
	}
	for _, p := range parked {
		if p.Realm == s.cfg.Realm && !p.Refused {
			s.log.Error("store: an event of this realm waits parked; it refers to a record no realm has given this node",
				"realm", p.Realm, "seq", p.Seq, "why", p.Why)
			return
		}
	}
}

// unparkPass projects every parked event whose records are held now, in
// parking order, and goes round again while that projects any: a parked
// event may wait for an earlier one.
func (s *Store) unparkPass(ctx context.Context) {
	s.unparkMu.Lock() // the loop's pass and a synchronous Unpark, one at a time
	defer s.unparkMu.Unlock()
	for {
		gen := s.parkGen.Load()
		ready, parked, err := s.readyParked()
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				s.log.Warn("store: reading the parked events", "err", err)
			}
			return
		}
		if parked == 0 {
			// Nothing parked, and no op parked anything since the read
			// began: commits need not wake the loop until one does.
			s.parkedNone.Store(gen)
			return
		}
		progress, now := false, time.Now()
		for _, run := range ready {
			// A realm's run stops at an event that faulted and is not due
			// again yet: what comes after it waits behind it.
			for i, p := range run {
				if s.unparkFaults[p.n].until.After(now) {
					run = run[:i]
					break
				}
			}
			if len(run) == 0 {
				continue
			}
			n, ok := s.unparkChunks(ctx, run)
			progress = progress || n > 0
			if !ok {
				return
			}
		}
		if !progress {
			return
		}
	}
}

// unparkFault is the fault a parked event last met, and when it is due to
// be tried again.
type unparkFault struct {
	why   string
	wait  time.Duration
	until time.Time
}

// A parked event that faults is tried again after unparkFaultFirst, then
// after twice as long each time the fault repeats, up to unparkFaultMax.
const (
	unparkFaultFirst = 100 * time.Millisecond
	unparkFaultMax   = 30 * time.Second
)

// unparkChunk is how many parked events one op projects at most.
const unparkChunk = 256

// unparkChunks projects a realm's run of parked events in order, many to an
// op, up to the first that still waits. An op that fails on one event is
// taken again event by event, so that a refused or faulty event is dealt
// with alone. It returns how many it took off the parked list, and false
// when the store closed.
func (s *Store) unparkChunks(ctx context.Context, run []ParkedEvent) (int, bool) {
	done := 0
	for len(run) > 0 {
		chunk := run[:min(len(run), unparkChunk)]
		var n int
		_, err := s.do(ctx, &op{events: len(chunk), retried: true, run: func(tx *Tx) (*StoredEvent, error) {
			var err error
			n, err = tx.unparkRun(chunk)
			return nil, err
		}})
		switch {
		case errors.Is(err, ErrClosed), errors.Is(err, ErrFailed), ctx.Err() != nil:
			return done, false
		case err == nil:
			done += n
			if n < len(chunk) {
				return done, true // the next one waits
			}
			run = run[len(chunk):]
			continue
		}
		for _, p := range chunk {
			took, stop, ok := s.unparkOne(ctx, p)
			if !ok {
				return done, false
			}
			if took {
				done++
			}
			if stop {
				return done, true
			}
		}
		run = run[len(chunk):]
	}
	return done, true
}

// unparkOne projects the parked event p alone, or keeps it refused when a
// projector refuses it. It reports whether p left the parked list, whether
// its realm must stop there (p still waits, or a fault), and false when the
// store closed.
func (s *Store) unparkOne(ctx context.Context, p ParkedEvent) (took, stop, ok bool) {
	_, err := s.do(ctx, &op{retried: true, run: func(tx *Tx) (*StoredEvent, error) { return tx.unpark(p) }})
	switch {
	case err == nil:
		delete(s.unparkFaults, p.n)
		return true, false, true
	case errors.Is(err, ErrDependency):
		return false, true, true
	case errors.Is(err, ErrClosed), errors.Is(err, ErrFailed), ctx.Err() != nil:
		return false, true, false
	case !IsRefusal(err):
		// A fault, not the event's: it stays parked, is tried again after
		// a wait that grows while the fault repeats, and is said again only
		// when the fault changes.
		if s.unparkFaults == nil {
			s.unparkFaults = map[uint64]unparkFault{}
		}
		f := s.unparkFaults[p.n]
		if why := err.Error(); f.why != why {
			f.why = why
			s.log.Warn("store: projecting a parked event; it stays parked and is tried again", "realm", p.Realm, "seq", p.Seq, "err", err)
		} else {
			s.log.Debug("store: projecting a parked event, again", "realm", p.Realm, "seq", p.Seq, "err", err)
		}
		f.wait = min(max(2*f.wait, unparkFaultFirst), unparkFaultMax)
		f.until = time.Now().Add(f.wait)
		s.unparkFaults[p.n] = f
		return false, true, true
	}
	delete(s.unparkFaults, p.n)
	// Its records are held, and a projector refuses it: it broke a rule of
	// the log. It stays in its chain, refused, and is not tried again until
	// the projectors' versions change (retryRefused).
	s.log.Warn("store: a parked event is refused", "realm", p.Realm, "seq", p.Seq, "err", err)
	why := err.Error()
	_, err = s.do(ctx, &op{run: func(tx *Tx) (*StoredEvent, error) {
		if _, err := tx.Get(parkedKey(p.n)); err != nil {
			return nil, err // gone meanwhile, or a read fault
		}
		tx.del(parkedKey(p.n))
		tx.addWaiting(string(p.Realm), -1)
		if err := tx.releaseScopes(string(p.Realm), p.n); err != nil {
			return nil, err
		}
		tx.put(join(prefixRefused, u64(p.n)), encodeParked(p.At, p.place, why))
		return nil, nil
	}})
	switch {
	case errors.Is(err, ErrNotFound):
		return false, false, true
	case err != nil:
		return false, true, !errors.Is(err, ErrClosed) && !errors.Is(err, ErrFailed) && ctx.Err() == nil
	}
	s.mu.Lock()
	hooks := slices.Clone(s.refusedHooks)
	s.mu.Unlock()
	for _, fn := range hooks {
		fn(p.Realm, p.Seq, why)
	}
	return true, false, true
}

// readyParked returns, from one snapshot, the parked events of every realm
// that may be projected now, each realm's in chain order, and how many are
// parked in all. A realm's run starts at its first event whose records are
// held and that shares no scope with an earlier event of its realm that
// still waits; it goes on with every later one that shares none either,
// whether its records are held yet or not, since an event before it in the
// run may make them: unparkRun stops at the first that waits after all. A
// pass costs the committer nothing for the events that still wait.
func (s *Store) readyParked() (runs [][]ParkedEvent, parked int, err error) {
	projectors := s.projectorList()
	type realmWalk struct {
		run     int             // index in runs; -1: none yet
		waiting map[string]bool // the scopes of its events that still wait
		all     bool            // one that waits meets every scope
	}
	err = s.View(func(tx *Tx) error {
		walks := map[protocol.Realm]*realmWalk{}
		err := tx.Iterate(prefixParked, false, func(k, v []byte) error {
			p, err := decodeParked(k, v)
			if err != nil {
				return err
			}
			parked++
			w := walks[p.Realm]
			if w == nil {
				w = &realmWalk{run: -1, waiting: map[string]bool{}}
				walks[p.Realm] = w
			}
			if w.all {
				return nil
			}
			scopes, _, err := tx.parkedScopes(p.n)
			if err != nil {
				return err
			}
			waits := false
			for _, sc := range scopes {
				if sc == scopeAll && len(w.waiting) > 0 || w.waiting[sc] {
					waits = true
				}
			}
			if !waits {
				se, err := tx.eventAt(placeKey(p.place))
				if err != nil {
					return err
				}
				// What it needs, an event of its realm projected earlier in
				// this pass may make: behind one, it is tried in the run,
				// which stops where one still waits.
				waits = se.Sequence == 0 && w.run < 0 && missing(tx, projectors, se) != nil
			}
			if waits {
				for _, sc := range scopes {
					w.waiting[sc] = true
					w.all = w.all || sc == scopeAll
				}
				return nil
			}
			if w.run < 0 {
				w.run = len(runs)
				runs = append(runs, nil)
			}
			runs[w.run] = append(runs[w.run], p)
			return nil
		})
		return err
	})
	return runs, parked, err
}

// EachChained calls fn for every event the store holds, parked ones
// included, in an order that keeps each realm's chain in seq order and is
// otherwise arrival order: an event whose realm has earlier events not yet
// visited (parked ones, or one projected later than it) comes after them.
// It is the order of an export, which an import stores link by link.
func (tx *Tx) EachChained(fn func(*StoredEvent) error) error {
	heads, err := tx.Heads()
	if err != nil {
		return err
	}
	done := make(map[string]uint64, len(heads))
	upTo := func(realm string, seq uint64) error {
		for s := done[realm] + 1; s <= seq; s++ {
			se, err := tx.eventAt(eventKey(realm, s))
			if err != nil {
				return fmt.Errorf("store: %s seq %d: %w", realm, s, err)
			}
			if err := fn(se); err != nil {
				return err
			}
			done[realm] = s
		}
		return nil
	}
	err = tx.Iterate(prefixSequence, false, func(_, v []byte) error {
		realm, seq, err := splitPlace(v)
		if err != nil {
			return err
		}
		return upTo(realm, seq)
	})
	if err != nil {
		return err
	}
	realms := make([]string, 0, len(heads))
	for r := range heads {
		realms = append(realms, string(r))
	}
	slices.Sort(realms)
	for _, r := range realms {
		if err := upTo(r, heads[protocol.Realm(r)].Seq); err != nil {
			return err
		}
	}
	return nil
}

// IsRefusal reports whether err, from an op that stored, restored or
// unparked an event, is a projector's refusal of the event (a rule of the
// log it breaks) rather than a fault: of the store, a read, a size, a
// panic, the chain, or a record not held.
func IsRefusal(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range []error{ErrDependency, ErrClosed, ErrFailed, ErrDiskFull, ErrAuthoringHeld, ErrSequence, ErrReservedKey, ErrReadOnly, ErrNotFound,
		errPanic, errFault, badger.ErrTxnTooBig, protocol.ErrChainBroken, protocol.ErrInvalidEvent, protocol.ErrNonCanonical,
		context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}
