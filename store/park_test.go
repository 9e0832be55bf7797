package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"relay/protocol"
)

// needs is a Dependent projector: an event of type "t.make" holds the
// record named by its body, one of type "t.need" needs it held, as an
// attestation needs its claim.
type needs struct{}

var needsPrefix = []byte("p/needs/")

func (needs) Prefixes() [][]byte { return [][]byte{needsPrefix} }

func (needs) record(se *StoredEvent) ([]byte, error) {
	var d struct {
		Body string `cbor:"body"`
	}
	if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
		return nil, err
	}
	return join(needsPrefix, []byte(d.Body)), nil
}

func (n needs) Missing(tx *Tx, se *StoredEvent) error { return n.missingFor("t.need", tx, se) }

// missingFor is Missing for events of type typ.
func (n needs) missingFor(typ string, tx *Tx, se *StoredEvent) error {
	if se.Event.Type != typ {
		return nil
	}
	k, err := n.record(se)
	if err != nil {
		return err
	}
	if _, err := tx.Get(k); errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrDependency, k)
	} else {
		return err
	}
}

func (n needs) Apply(tx *Tx, se *StoredEvent) error {
	switch se.Event.Type {
	case "t.make":
		k, err := n.record(se)
		if err != nil {
			return err
		}
		return tx.Set(k, []byte{1})
	case "t.need":
		if err := n.Missing(tx, se); err != nil {
			return err
		}
	}
	return nil
}

// realmChain signs events of realm, one per (type, body), linked.
func realmChain(t testing.TB, realm protocol.Realm, key ed25519.PrivateKey, evs ...[2]string) [][]byte {
	t.Helper()
	var out [][]byte
	var prev cid.Cid
	for i, e := range evs {
		ev := &protocol.Event{Realm: string(realm), Seq: uint64(i + 1), Type: e[0], At: 1_700_000_000_000 + int64(i),
			Author: string(realm) + ":bot", Data: mustData(t, map[string]any{"body": e[1]})}
		if prev.Defined() {
			ev.Prev = protocol.Link{Cid: prev}
		}
		raw, c, err := ev.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		out, prev = append(out, raw), c
	}
	return out
}

func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// openParking opens a store with ps registered and its projections
// recorded, so that parked events are tried again after commits.
func openParking(t testing.TB, cfg Config, ps ...Projector) *Store {
	t.Helper()
	s := openTest(t, cfg, ps...)
	if _, err := s.EnsureProjections(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkedOf decodes signed events for Restore.
func checkedOf(t testing.TB, raws ...[]byte) []Checked {
	t.Helper()
	out := make([]Checked, len(raws))
	for i, raw := range raws {
		ev, c, err := protocol.DecodeEvent(raw)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = Checked{ev, c, raw}
	}
	return out
}

// arrival lists the store's events in arrival order (e/n/) as realm:seq.
func arrival(t testing.TB, s *Store) []string {
	t.Helper()
	var out []string
	err := s.View(func(tx *Tx) error {
		return tx.EachEvent(0, func(se *StoredEvent) error {
			out = append(out, fmt.Sprintf("%s:%d@%d", se.Event.Realm, se.Event.Seq, se.Sequence))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPark: an event that refers to a record not held is stored in its
// realm's chain without blocking it, and so are the realm's later events,
// which wait behind it; other realms go on. Once the record arrives they
// are projected in their chain's order, at the sequences they then get.
// Parked events are kept across a restart.
// checkParked checks the store's parked counts, and each realm's first
// parked and first refused event, against a reading of every one.
func checkParked(t *testing.T, s *Store) {
	t.Helper()
	all, err := s.ParkedEvents(0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[protocol.Realm]int{}
	realms := map[protocol.Realm]bool{}
	firstParked, firstRefused := map[protocol.Realm]ParkedEvent{}, map[protocol.Realm]ParkedEvent{}
	for _, p := range all {
		realms[p.Realm] = true
		first := firstParked
		if p.Refused {
			first = firstRefused
		} else {
			want[p.Realm]++
		}
		if _, ok := first[p.Realm]; !ok {
			first[p.Realm] = p
		}
	}
	if got := s.ParkedCounts(); !maps.Equal(got, want) {
		t.Fatalf("parked counts %v, want %v", got, want)
	}
	parked, refused, err := s.FirstParked(realms, len(all)+1)
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b ParkedEvent) bool {
		return a.Realm == b.Realm && a.Seq == b.Seq && a.Why == b.Why && a.Refused == b.Refused
	}
	if !maps.EqualFunc(parked, firstParked, same) || !maps.EqualFunc(refused, firstRefused, same) {
		t.Fatalf("first parked %+v and refused %+v, want %+v and %+v", parked, refused, firstParked, firstRefused)
	}
}

func TestPark(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bKey, xKey, yKey := testKey(2), testKey(3), testKey(4)
	b := realmChain(t, "b", bKey, [2]string{"t.need", "thing"}, [2]string{"t.make", "other"}, [2]string{"t.need", "other"})
	x := realmChain(t, "x", xKey, [2]string{"t.make", "thing"})
	y := realmChain(t, "y", yKey, [2]string{"t.make", "else"})

	s := openParking(t, testConfig(dir), needs{}, counter{})
	// b's first event needs x's record: parked, and b's chain goes on.
	if n, err := s.IngestChain(ctx, b, verifyWith(bKey)); err != nil || n != 3 {
		t.Fatalf("ingest b: %d %v", n, err)
	}
	if _, err := s.Ingest(ctx, y[0], verifyWith(yKey)); err != nil {
		t.Fatal(err)
	}
	if hs, err := s.Heads(); err != nil || hs["b"].Seq != 3 {
		t.Fatalf("b's head %v %v", hs, err)
	}
	if got, want := arrival(t, s), []string{"y:1@1"}; !slices.Equal(got, want) {
		t.Fatalf("projected %v, want %v", got, want)
	}
	parked, err := s.ParkedEvents(0)
	if err != nil || len(parked) != 3 || parked[0].Realm != "b" || parked[0].Seq != 1 || !strings.Contains(parked[0].Why, "p/needs/thing") ||
		parked[2].Seq != 3 || !strings.Contains(parked[2].Why, "earlier event") {
		t.Fatalf("parked %+v %v", parked, err)
	}
	if se, err := s.EventAt("b", 1); err != nil || se.Sequence != 0 {
		t.Fatalf("the parked event: %+v %v", se, err)
	}
	checkParked(t, s)

	// Held across a restart, and a duplicate of it is a duplicate.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, testConfig(dir), needs{}, counter{})
	if _, err := s.Ingest(ctx, b[0], verifyWith(bKey)); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the parked event again: %v", err)
	}
	if _, err := s.EnsureProjections(ctx); err != nil {
		t.Fatal(err)
	}
	if parked, _ := s.ParkedEvents(0); len(parked) != 3 {
		t.Fatalf("after the restart, parked %+v", parked)
	}
	checkParked(t, s)

	// x's record arrives: b's events are projected after it, in order.
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the parked events to be projected", func() bool {
		p, err := s.ParkedEvents(0)
		return err == nil && len(p) == 0
	})
	if got, want := arrival(t, s), []string{"y:1@1", "x:1@2", "b:1@3", "b:2@4", "b:3@5"}; !slices.Equal(got, want) {
		t.Fatalf("projected %v, want %v", got, want)
	}
	checkParked(t, s)
	if c := counts(t, s); c["t.need"] != 2 || c["t.make"] != 3 {
		t.Fatalf("counted %v", c)
	}

	// An export's order keeps every chain in seq order.
	var order []string
	err = s.View(func(tx *Tx) error {
		return tx.EachChained(func(se *StoredEvent) error {
			order = append(order, fmt.Sprintf("%s:%d", se.Event.Realm, se.Event.Seq))
			return nil
		})
	})
	if want := []string{"y:1", "x:1", "b:1", "b:2", "b:3"}; err != nil || !slices.Equal(order, want) {
		t.Fatalf("chained order %v %v, want %v", order, err, want)
	}

	// A rebuild replays in arrival order, the parked event after its record.
	if err := s.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	if c := counts(t, s); c["t.need"] != 2 {
		t.Fatalf("after the rebuild, counted %v", c)
	}
}

// TestParkRestore: an import parks what it cannot project yet, and a
// chunk's place is counted in events held, parked ones included.
func TestParkRestore(t *testing.T) {
	ctx := context.Background()
	bKey := testKey(2)
	b := realmChain(t, "b", bKey, [2]string{"t.need", "never"}, [2]string{"t.make", "one"})
	s := openParking(t, testConfig(""), needs{}, counter{})
	evs := checkedOf(t, b...)
	first := s.Restore(ctx, 0, evs[:1])
	second := s.Restore(ctx, 1, evs[1:])
	if err := first(); err != nil {
		t.Fatal(err)
	}
	if err := second(); err != nil {
		t.Fatal(err)
	}
	if got := arrival(t, s); len(got) != 0 {
		t.Fatalf("projected %v", got)
	}
	if p, _ := s.ParkedEvents(0); len(p) != 2 || p[0].Seq != 1 || p[1].Seq != 2 {
		t.Fatalf("parked %+v", p)
	}
	if err := s.Restore(ctx, 1, nil)(); !errors.Is(err, ErrSequence) {
		t.Fatalf("a chunk after 1 of 2 events: %v", err)
	}
}

// blocker holds the op applying a "t.block" event until release closes,
// after closing entered.
type blocker struct{ entered, release chan struct{} }

func (blocker) Prefixes() [][]byte { return [][]byte{[]byte("p/block/")} }

func (b blocker) Apply(_ *Tx, se *StoredEvent) error {
	if se.Event.Type == "t.block" {
		close(b.entered)
		<-b.release
	}
	return nil
}

// TestParkedWhileAPassRuns: a pass that reads the parked events while an op
// that parks one is in flight finds none; the parking still wakes the next
// pass once committed, so the event is projected when its record arrives.
func TestParkedWhileAPassRuns(t *testing.T) {
	ctx := context.Background()
	bKey, xKey, yKey := testKey(2), testKey(3), testKey(4)
	b := realmChain(t, "b", bKey, [2]string{"t.need", "thing"})
	y := realmChain(t, "y", yKey, [2]string{"t.block", "z"})
	x := realmChain(t, "x", xKey, [2]string{"t.make", "thing"})
	bl := blocker{entered: make(chan struct{}), release: make(chan struct{})}
	s := openParking(t, testConfig(""), needs{}, counter{}, bl)
	// One op (as an import's chunk) parks b:1, then holds in y:1's Apply.
	evs := checkedOf(t, b[0], y[0])
	wait := s.Restore(ctx, 0, evs)
	<-bl.entered
	s.unparkPass(ctx) // finds nothing committed
	close(bl.release)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.ParkedEvents(0); len(p) != 1 {
		t.Fatalf("parked %+v", p)
	}
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b:1 projected", func() bool { p, err := s.ParkedEvents(0); return err == nil && len(p) == 0 })
}

// TestUnparkSoonAfterIdlePasses: passes that project nothing, while other
// realms' events keep coming and a parked event still waits, do not put
// off the pass that the record it waits for brings.
func TestUnparkSoonAfterIdlePasses(t *testing.T) {
	ctx := context.Background()
	bKey, xKey, yKey := testKey(2), testKey(3), testKey(4)
	b := realmChain(t, "b", bKey, [2]string{"t.need", "thing"})
	x := realmChain(t, "x", xKey, [2]string{"t.make", "thing"})
	var ys [][2]string
	for i := range 40 {
		ys = append(ys, [2]string{"t.make", fmt.Sprintf("else-%d", i)})
	}
	y := realmChain(t, "y", yKey, ys...)
	s := openParking(t, testConfig(""), needs{}, counter{})
	if _, err := s.Ingest(ctx, b[0], verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	// About 2 s of events that bring nothing b:1 waits for, each a pass.
	for _, raw := range y {
		if _, err := s.Ingest(ctx, raw, verifyWith(yKey)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p, _ := s.ParkedEvents(0); len(p) != 1 {
		t.Fatalf("parked %+v", p)
	}
	start := time.Now()
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b:1 projected", func() bool { p, err := s.ParkedEvents(0); return err == nil && len(p) == 0 })
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Fatalf("b:1 was projected %v after its record arrived", d)
	}
}

func TestUnparkRest(t *testing.T) {
	for _, c := range []struct{ pass, rest time.Duration }{
		{0, unparkMin},
		{100 * time.Microsecond, unparkMin},
		{time.Millisecond, 20 * time.Millisecond},
		{100 * time.Millisecond, 2 * time.Second},
	} {
		if got := unparkRest(c.pass); got != c.rest {
			t.Errorf("after a pass of %v, rest %v, want %v", c.pass, got, c.rest)
		}
	}
}

// faulty projects t.need with a fault (not a refusal) once its record is held.
type faulty struct {
	needs
	tries *atomic.Int64
}

func (f faulty) Apply(tx *Tx, se *StoredEvent) error {
	if se.Event.Type == "t.need" {
		if err := f.Missing(tx, se); err != nil {
			return err
		}
		f.tries.Add(1)
		return fmt.Errorf("%w: a fault", errFault)
	}
	return f.needs.Apply(tx, se)
}

// TestUnparkFaultBacksOff: a parked event whose projection keeps faulting
// is tried again after a growing wait, not on every pass that other
// realms' events bring.
func TestUnparkFaultBacksOff(t *testing.T) {
	ctx := context.Background()
	bKey, xKey, yKey := testKey(2), testKey(3), testKey(4)
	b := realmChain(t, "b", bKey, [2]string{"t.need", "thing"})
	x := realmChain(t, "x", xKey, [2]string{"t.make", "thing"})
	var ys [][2]string
	for i := range 4000 {
		ys = append(ys, [2]string{"t.make", fmt.Sprintf("e%d", i)})
	}
	y := realmChain(t, "y", yKey, ys...)
	var tries atomic.Int64
	s := openParking(t, testConfig(t.TempDir()), faulty{tries: &tries})
	if _, err := s.Ingest(ctx, b[0], verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	tries.Store(0)
	start, n := time.Now(), 0
	for time.Since(start) < 2*time.Second && n < len(y) {
		if _, err := s.Ingest(ctx, y[n], verifyWith(yKey)); err != nil {
			t.Fatal(err)
		}
		n++
	}
	// Due after 0.1, 0.2, 0.4 and 0.8 s: about 4 times in 2 s, each try
	// an op of the chunk and one of the event alone.
	if got := tries.Load(); got > 12 {
		t.Fatalf("%d events of y in %v; the faulty parked event was tried %d times", n, time.Since(start), got)
	}
}

// refuser refuses a "t.bad" event once the record it needs is held.
type refuser struct{ needs }

func (r refuser) Missing(tx *Tx, se *StoredEvent) error { return r.missingFor("t.bad", tx, se) }

func (r refuser) Apply(tx *Tx, se *StoredEvent) error {
	if se.Event.Type == "t.bad" {
		if err := r.Missing(tx, se); err != nil {
			return err
		}
		return errors.New("t.bad breaks a rule")
	}
	return r.needs.Apply(tx, se)
}

// TestParkedThenRefused: a parked event a projector refuses once its record
// arrives stays in its chain, refused, and is not tried again; an import
// restores it so (RestoreRefused).
func TestParkedThenRefused(t *testing.T) {
	ctx := context.Background()
	bKey, xKey := testKey(2), testKey(3)
	b := realmChain(t, "b", bKey, [2]string{"t.bad", "thing"}, [2]string{"t.make", "mine"})
	x := realmChain(t, "x", xKey, [2]string{"t.make", "thing"})
	s := openParking(t, testConfig(""), refuser{})
	told := make(chan string, 1)
	s.OnRefused(func(realm protocol.Realm, seq uint64, why string) { told <- fmt.Sprintf("%s:%d %s", realm, seq, why) })
	if n, err := s.IngestChain(ctx, b, verifyWith(bKey)); err != nil || n != 2 {
		t.Fatalf("ingest b: %d %v", n, err)
	}
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b:1 refused", func() bool {
		p, err := s.ParkedEvents(0)
		return err == nil && len(p) == 1 && p[0].Refused && strings.Contains(p[0].Why, "breaks a rule")
	})
	if got, want := arrival(t, s), []string{"x:1@1", "b:2@2"}; !slices.Equal(got, want) {
		t.Fatalf("projected %v, want %v", got, want)
	}
	if got := <-told; got != "b:1 t.bad breaks a rule" {
		t.Fatalf("told %q", got)
	}
	checkParked(t, s)

	// The export's order (x:1 b:1 b:2), restored into a fresh store: the
	// projector refuses b:1, and RestoreRefused keeps it so, as an import
	// does once it has the refused event alone.
	var evs []Checked
	err := s.View(func(tx *Tx) error {
		return tx.EachChained(func(se *StoredEvent) error {
			evs = append(evs, Checked{se.Event, se.CID, se.Raw})
			return nil
		})
	})
	if err != nil || len(evs) != 3 || evs[1].Event.Realm != "b" || evs[1].Event.Seq != 1 {
		t.Fatalf("exported %d: %v", len(evs), err)
	}
	dst2 := openParking(t, testConfig(""), refuser{})
	if err := dst2.Restore(ctx, 0, evs)(); err == nil || !strings.Contains(err.Error(), "breaks a rule") {
		t.Fatalf("restoring the export whole: %v", err)
	}
	if err := dst2.Restore(ctx, 0, evs[:1])(); err != nil {
		t.Fatal(err)
	}
	if err := dst2.RestoreRefused(ctx, 1, evs[1], "breaks a rule"); err != nil {
		t.Fatal(err)
	}
	if err := dst2.Restore(ctx, 2, evs[2:])(); err != nil {
		t.Fatal(err)
	}
	if p, _ := dst2.ParkedEvents(0); len(p) != 1 || !p[0].Refused {
		t.Fatalf("restored, parked %+v", p)
	}
	checkParked(t, dst2)
	if hs, _ := dst2.Heads(); hs["b"].Seq != 2 {
		t.Fatalf("b's head %v", hs["b"])
	}
}

// TestUnparkLongRun: a realm's long run of parked events, each needing what
// the one before makes, is projected in order once the first one's record
// arrives, many to an op.
func TestUnparkLongRun(t *testing.T) {
	ctx := context.Background()
	bKey, xKey := testKey(2), testKey(3)
	evs := [][2]string{{"t.need", "thing"}}
	for i := range 600 {
		evs = append(evs, [2]string{"t.make", fmt.Sprint("k", i)}, [2]string{"t.need", fmt.Sprint("k", i)})
	}
	b := realmChain(t, "b", bKey, evs...)
	x := realmChain(t, "x", xKey, [2]string{"t.make", "thing"})
	s := openParking(t, testConfig(""), needs{}, counter{})
	if _, err := s.IngestChain(ctx, b, verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.ParkedEvents(0); len(p) != len(b) {
		t.Fatalf("parked %d of %d", len(p), len(b))
	}
	commits := s.commits.Load()
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run projected", func() bool { p, err := s.ParkedEvents(0); return err == nil && len(p) == 0 })
	got := arrival(t, s)
	for i, a := range got[1:] {
		if want := fmt.Sprintf("b:%d@%d", i+1, i+2); a != want {
			t.Fatalf("projected %s at %d, want %s", a, i, want)
		}
	}
	if c := counts(t, s); c["t.need"] != 601 {
		t.Fatalf("counted %v", c)
	}
	if n := s.commits.Load() - commits; n > 50 {
		t.Fatalf("%d commits to project %d events", n, len(b))
	}
}

// flaky is needs whose Missing cannot tell while fault is set.
type flaky struct {
	needs
	fault *atomic.Bool
}

func (f flaky) Missing(tx *Tx, se *StoredEvent) error {
	if f.fault.Load() && se.Event.Type == "t.need" {
		return errors.New("read: value log: checksum mismatch")
	}
	return f.needs.Missing(tx, se)
}

// TestUnparkFaultIsNoRefusal: a projector that cannot tell whether an
// event's records are held leaves it parked, neither projected nor
// refused, and it is projected once the fault is gone.
func TestUnparkFaultIsNoRefusal(t *testing.T) {
	ctx := context.Background()
	bKey, xKey := testKey(2), testKey(3)
	b := realmChain(t, "b", bKey, [2]string{"t.need", "thing"})
	x := realmChain(t, "x", xKey, [2]string{"t.make", "thing"}, [2]string{"t.make", "more"})
	var fault atomic.Bool
	s := openParking(t, testConfig(""), flaky{fault: &fault})
	var told atomic.Bool
	s.OnRefused(func(protocol.Realm, uint64, string) { told.Store(true) })
	if _, err := s.Ingest(ctx, b[0], verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	fault.Store(true)
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	s.unparkPass(ctx)
	if p, _ := s.ParkedEvents(0); len(p) != 1 || p[0].Refused || told.Load() {
		t.Fatalf("after a fault, parked %+v, refusal told %v", p, told.Load())
	}
	fault.Store(false)
	if _, err := s.Ingest(ctx, x[1], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b:1 projected", func() bool { p, err := s.ParkedEvents(0); return err == nil && len(p) == 0 })
}

// panicky is needs whose Apply panics on "t.need" events while panics is
// set: a projector's bug that a crafted event sets off.
type panicky struct {
	needs
	panics *atomic.Bool
}

func (p panicky) Apply(tx *Tx, se *StoredEvent) error {
	if p.panics.Load() && se.Event.Type == "t.need" {
		panic("projector bug")
	}
	return p.needs.Apply(tx, se)
}

// TestUnparkPanicWarnsOnce: a parked event whose projection panics stays
// parked, tried on every pass, and the same fault is one warning in the
// log, not one a pass; once the projector takes it, it is projected.
func TestUnparkPanicWarnsOnce(t *testing.T) {
	ctx := context.Background()
	bKey, xKey := testKey(2), testKey(3)
	b := realmChain(t, "b", bKey, [2]string{"t.need", "thing"})
	x := realmChain(t, "x", xKey, [2]string{"t.make", "thing"}, [2]string{"t.make", "more"})
	var panics atomic.Bool
	cfg := testConfig("")
	logged := &syncWriter{}
	cfg.Logger = slog.New(slog.NewTextHandler(logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := openParking(t, cfg, panicky{panics: &panics})
	if _, err := s.Ingest(ctx, b[0], verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	panics.Store(true)
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.unparkPass(ctx)
	}
	if p, _ := s.ParkedEvents(0); len(p) != 1 || p[0].Refused {
		t.Fatalf("after a panic, parked %+v", p)
	}
	if n := strings.Count(logged.String(), "projecting a parked event"); n != 1 {
		t.Fatalf("%d warnings of the same fault:\n%s", n, logged.String())
	}
	if n := strings.Count(logged.String(), "op panicked"); n != 1 {
		t.Fatalf("%d panics logged of the same fault:\n%s", n, logged.String())
	}
	panics.Store(false)
	if _, err := s.Ingest(ctx, x[1], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b:1 projected", func() bool { p, err := s.ParkedEvents(0); return err == nil && len(p) == 0 })
}

// late is needs whose Missing overlooks "t.late" events, though their Apply
// needs the record: a dependency Missing overlooks.
type late struct{ needs }

func (l late) Apply(tx *Tx, se *StoredEvent) error {
	if se.Event.Type == "t.late" {
		return l.missingFor("t.late", tx, se)
	}
	return l.needs.Apply(tx, se)
}

// TestUnparkApplyDependency: a parked event whose Apply meets a record not
// held, which Missing overlooked, stays parked, unprojected: the op that
// met it fails, rather than commit the event half projected.
func TestUnparkApplyDependency(t *testing.T) {
	ctx := context.Background()
	bKey, xKey := testKey(2), testKey(3)
	b := realmChain(t, "b", bKey, [2]string{"t.need", "thing"}, [2]string{"t.late", "never"})
	x := realmChain(t, "x", xKey, [2]string{"t.make", "thing"})
	s := openParking(t, testConfig(""), counter{}, late{})
	if _, err := s.IngestChain(ctx, b, verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	s.Unpark(ctx)
	p, err := s.ParkedEvents(0)
	if err != nil {
		t.Fatal(err)
	}
	se, err := s.EventAt("b", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || p[0].Seq != 2 || se.Sequence != 0 || counts(t, s)["t.late"] != 0 {
		t.Fatalf("b:2 left the parked list: parked %+v, sequence %d, counted %v", p, se.Sequence, counts(t, s))
	}
	if got, want := arrival(t, s), []string{"x:1@1", "b:1@2"}; !slices.Equal(got, want) {
		t.Fatalf("projected %v, want %v", got, want)
	}
}

// syncWriter collects what a logger writes, which the unpark loop and the
// test may do at once.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// scopedNeeds is needs that names its scopes: the record an event makes or
// needs.
type scopedNeeds struct{ needs }

func (n scopedNeeds) Scopes(tx *Tx, se *StoredEvent) ([]string, error) {
	k, err := n.record(se)
	if err != nil {
		return nil, err
	}
	return []string{string(k)}, nil
}

// TestParkScoped: a realm's later event waits behind a parked one only when
// they share a scope; one that shares none is projected at once. What waits
// keeps its chain's order when its record comes, across a restart too, and
// events parked before parking had scopes hold back every later one.
func TestParkScoped(t *testing.T) {
	ctx := context.Background()
	bKey, xKey := testKey(2), testKey(3)
	b := realmChain(t, "b", bKey,
		[2]string{"t.need", "thing"}, // 1: waits for x's thing
		[2]string{"t.make", "other"}, // 2: touches nothing 1 does: projected
		[2]string{"t.need", "thing"}, // 3: behind 1
		[2]string{"t.make", "more"},  // 4: projected
		[2]string{"t.make", "z"},     // 5: after the restart, projected
		[2]string{"t.need", "thing"}, // 6: after the restart, behind 1 and 3
	)
	x := realmChain(t, "x", xKey, [2]string{"t.make", "thing"})
	dir := t.TempDir()
	s := openParking(t, testConfig(dir), scopedNeeds{})
	if _, err := s.IngestChain(ctx, b[:4], verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	if got := arrival(t, s); !slices.Equal(got, []string{"b:2@1", "b:4@2"}) {
		t.Fatalf("projected %v", got)
	}
	if p, _ := s.ParkedEvents(0); len(p) != 2 || p[0].Seq != 1 || p[1].Seq != 3 {
		t.Fatalf("parked %+v", p)
	}
	s.Close()

	s = openParking(t, testConfig(dir), scopedNeeds{})
	if _, err := s.IngestChain(ctx, b[4:6], verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	if got := arrival(t, s); !slices.Equal(got, []string{"b:2@1", "b:4@2", "b:5@3"}) {
		t.Fatalf("after the restart, projected %v", got)
	}
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's parked events projected", func() bool { p, err := s.ParkedEvents(0); return err == nil && len(p) == 0 })
	if got := arrival(t, s); !slices.Equal(got, []string{"b:2@1", "b:4@2", "b:5@3", "x:1@4", "b:1@5", "b:3@6", "b:6@7"}) {
		t.Fatalf("projected %v", got)
	}
	// Nothing parked is left to hold anything back.
	err := s.View(func(tx *Tx) error {
		for _, pre := range [][]byte{prefixParkedScopes, prefixScopeCount} {
			if err := tx.Iterate(pre, false, func(k, _ []byte) error { return fmt.Errorf("left: %q", k) }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestParkScopedOnStart: events parked before parking had scopes (many: the
// work is done in chunks) are given theirs when the store starts, and hold
// back only what shares them.
func TestParkScopedOnStart(t *testing.T) {
	ctx := context.Background()
	bKey := testKey(2)
	b := realmChain(t, "b", bKey, [2]string{"t.need", "thing"}, [2]string{"t.make", "other"}, [2]string{"t.need", "thing"})
	dir := t.TempDir()
	s := openParking(t, testConfig(dir), scopedNeeds{})
	if _, err := s.Ingest(ctx, b[0], verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	// Copies of its parking record under more numbers, and no scopes
	// for any: as a store of the version before kept them.
	legacy := 2*scopeChunk + 7
	_, err := s.do(ctx, &op{run: func(tx *Tx) (*StoredEvent, error) {
		rec, err := tx.Get(parkedKey(1))
		if err != nil {
			return nil, err
		}
		for n := 2; n <= legacy; n++ {
			tx.put(parkedKey(uint64(n)), rec)
		}
		for _, pre := range [][]byte{prefixParkedScopes, prefixScopeCount} {
			var keys [][]byte
			if err := tx.Iterate(pre, false, func(k, _ []byte) error { keys = append(keys, bytes.Clone(k)); return nil }); err != nil {
				return nil, err
			}
			for _, k := range keys {
				tx.del(k)
			}
		}
		return nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openParking(t, testConfig(dir), scopedNeeds{})
	err = s.View(func(tx *Tx) error {
		v, err := tx.Get(scopeCountKey("b", "p/needs/thing"))
		if err != nil || binary.BigEndian.Uint64(v) != uint64(legacy) {
			return fmt.Errorf("thing counted %x, %v; want %d", v, err, legacy)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.IngestChain(ctx, b[1:], verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	if got := arrival(t, s); !slices.Equal(got, []string{"b:2@1"}) {
		t.Fatalf("projected %v", got)
	}
}

// scopedNeedsV2 is scopedNeeds of another version, which names one scope
// more: the kind of the event.
type scopedNeedsV2 struct{ scopedNeeds }

func (scopedNeedsV2) ProjectionVersion() string { return "needs/2" }

func (n scopedNeedsV2) Scopes(tx *Tx, se *StoredEvent) ([]string, error) {
	s, err := n.scopedNeeds.Scopes(tx, se)
	return append(s, "kind/"+se.Event.Type), err
}

// refuserV1 is refuser with a version; accepterV2, its next version,
// projects what refuserV1 refused.
type refuserV1 struct{ refuser }

func (refuserV1) ProjectionVersion() string { return "refuser/1" }

type accepterV2 struct{ needs }

func (accepterV2) ProjectionVersion() string { return "refuser/2" }

func (a accepterV2) Missing(tx *Tx, se *StoredEvent) error { return a.missingFor("t.bad", tx, se) }

// Scopes names the record an event's body names.
func (a accepterV2) Scopes(tx *Tx, se *StoredEvent) ([]string, error) {
	k, err := a.record(se)
	return []string{string(k)}, err
}

func (a accepterV2) Apply(tx *Tx, se *StoredEvent) error {
	if se.Event.Type == "t.bad" {
		if err := a.Missing(tx, se); err != nil {
			return err
		}
		return tx.Set(join(needsPrefix, []byte("accepted")), []byte{1})
	}
	return a.needs.Apply(tx, se)
}

// refusedIn makes a store in dir whose projector p refused b:1 ("t.bad"
// needing x's "thing") once x:1 came, b:2 ("t.make" of "mine") projected
// after it, and closes it; it returns b's and x's chains.
func refusedIn(t *testing.T, dir string, p Projector) (b, x [][]byte) {
	t.Helper()
	ctx := context.Background()
	bKey, xKey := testKey(2), testKey(3)
	b = realmChain(t, "b", bKey, [2]string{"t.bad", "thing"}, [2]string{"t.make", "mine"})
	x = realmChain(t, "x", xKey, [2]string{"t.make", "thing"})
	s := openParking(t, testConfig(dir), p)
	defer s.Close()
	if n, err := s.IngestChain(ctx, b, verifyWith(bKey)); err != nil || n != 2 {
		t.Fatalf("ingest b: %d %v", n, err)
	}
	if _, err := s.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b:1 refused", func() bool { p, err := s.ParkedEvents(0); return err == nil && len(p) == 1 && p[0].Refused })
	return b, x
}

// TestRefusedTriedAfterUpgrade: a parked event a projector refused stays
// refused while the projectors keep their versions, and is tried again,
// and projected, by a version that accepts it.
func TestRefusedTriedAfterUpgrade(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	refusedIn(t, dir, refuserV1{})
	s := openParking(t, testConfig(dir), refuserV1{})
	refused := func() bool { p, err := s.ParkedEvents(0); return err == nil && len(p) == 1 && p[0].Refused }
	s.Unpark(ctx)
	if !refused() {
		t.Fatalf("the same version again: parked %+v", must(s.ParkedEvents(0)))
	}
	checkParked(t, s)
	s.Close()

	told := 0
	s = openTest(t, testConfig(dir), accepterV2{})
	s.OnRefused(func(protocol.Realm, uint64, string) { told++ })
	if rebuilt, err := s.EnsureProjections(ctx); err != nil || !rebuilt {
		t.Fatalf("upgrade: rebuilt %v, %v", rebuilt, err)
	}
	if p, err := s.ParkedEvents(0); err != nil || len(p) != 0 || told != 0 {
		t.Fatalf("after the upgrade, parked %+v %v, told %d", p, err, told)
	}
	checkParked(t, s)
	if got, want := arrival(t, s), []string{"x:1@1", "b:2@2", "b:1@3"}; !slices.Equal(got, want) {
		t.Fatalf("projected %v, want %v", got, want)
	}
	err := s.View(func(tx *Tx) error { _, err := tx.Get(join(needsPrefix, []byte("accepted"))); return err })
	if err != nil {
		t.Fatalf("b:1's record: %v", err)
	}
}

// TestRefusedRetryAfterAStop: a start that stops after the rebuild, before
// the refused events were tried again, leaves them to the next start of
// the same version.
func TestRefusedRetryAfterAStop(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	refusedIn(t, dir, refuserV1{})
	s := openTest(t, testConfig(dir), accepterV2{})
	s.beforeCommit = func() error {
		return s.db.View(func(txn *badger.Txn) error {
			if _, err := txn.Get(keyRebuilding); errors.Is(err, badger.ErrKeyNotFound) {
				return errors.New("stopped right after the rebuild")
			}
			return nil
		})
	}
	if _, err := s.EnsureProjections(ctx); err == nil {
		t.Fatal("the stop did not happen")
	}
	s.Close()

	s = openParking(t, testConfig(dir), accepterV2{})
	if p, err := s.ParkedEvents(0); err != nil || len(p) != 0 {
		t.Fatalf("after the next start, parked %+v %v", p, err)
	}
}

// lastWins1 and lastWins2 add to refuserV1 and accepterV2 a record that
// every event of a realm overwrites (as a realm's profile, or a thread's
// title): two events of a realm do not commute, and lastWins2 says so.
type (
	lastWins1 struct{ refuserV1 }
	lastWins2 struct{ accepterV2 }
)

func lastKey(se *StoredEvent) []byte {
	return join(needsPrefix, []byte("last/"), []byte(se.Event.Realm))
}

func setLast(tx *Tx, se *StoredEvent) error {
	k, err := needs{}.record(se)
	if err != nil {
		return err
	}
	return tx.Set(lastKey(se), k)
}

func (l lastWins1) Apply(tx *Tx, se *StoredEvent) error {
	if err := l.refuserV1.Apply(tx, se); err != nil {
		return err
	}
	return setLast(tx, se)
}

func (l lastWins2) Apply(tx *Tx, se *StoredEvent) error {
	if err := l.accepterV2.Apply(tx, se); err != nil {
		return err
	}
	return setLast(tx, se)
}

func (l lastWins2) Scopes(tx *Tx, se *StoredEvent) ([]string, error) {
	sc, err := l.accepterV2.Scopes(tx, se)
	return append(sc, string(lastKey(se))), err
}

// TestRefusedKeptBeforeLaterEvents: a refused event that shares a scope
// with a later event of its realm, projected since, stays refused after
// the upgrade: projected now, after it, it would leave the node in a state
// that a node of the new version, projecting the chain in order, never
// reaches.
func TestRefusedKeptBeforeLaterEvents(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, x := refusedIn(t, dir, lastWins1{})
	bKey, xKey := testKey(2), testKey(3)
	s := openParking(t, testConfig(dir), lastWins2{})
	if p, err := s.ParkedEvents(0); err != nil || len(p) != 1 || !p[0].Refused {
		t.Fatalf("after the upgrade, parked %+v %v", p, err)
	}
	fresh := openParking(t, testConfig(""), lastWins2{})
	if _, err := fresh.Ingest(ctx, x[0], verifyWith(xKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.IngestChain(ctx, b, verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	last := func(s *Store) (v []byte) {
		if err := s.View(func(tx *Tx) (err error) { v, err = tx.Get(join(needsPrefix, []byte("last/b"))); return }); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got, want := last(s), last(fresh); !bytes.Equal(got, want) {
		t.Fatalf("b's last record %q, a node of the new version %q", got, want)
	}
}

func TestMeets(t *testing.T) {
	for _, c := range []struct {
		a, b []string
		want bool
	}{
		{nil, nil, false},
		{[]string{"x"}, []string{"y"}, false},
		{[]string{"x", "y"}, []string{"y"}, true},
		{[]string{scopeAll}, nil, true},
		{nil, []string{scopeAll}, true},
	} {
		if got := meets(c.a, c.b); got != c.want {
			t.Errorf("meets(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestParkRescopedOnUpgrade: when the projectors' versions change, the
// parked events' scopes are named again by the new ones.
func TestParkRescopedOnUpgrade(t *testing.T) {
	ctx := context.Background()
	bKey := testKey(2)
	b := realmChain(t, "b", bKey, [2]string{"t.need", "thing"}, [2]string{"t.need", "more"})
	dir := t.TempDir()
	s := openParking(t, testConfig(dir), scopedNeeds{})
	if _, err := s.Ingest(ctx, b[0], verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openParking(t, testConfig(dir), scopedNeedsV2{})
	if _, err := s.Ingest(ctx, b[1], verifyWith(bKey)); err != nil {
		t.Fatal(err)
	}
	// Both wait, and both have the scope only the new version names.
	if p, _ := s.ParkedEvents(0); len(p) != 2 {
		t.Fatalf("parked %+v", p)
	}
	err := s.View(func(tx *Tx) error {
		v, err := tx.Get(scopeCountKey("b", "kind/t.need"))
		if err != nil || binary.BigEndian.Uint64(v) != 2 {
			return fmt.Errorf("kind counted %x, %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
