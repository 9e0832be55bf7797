package parley

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"relay/protocol"
	"relay/store"
	"relay/testnet/cputime"
)

// BenchmarkCatchUp folds a peer realm's messages into one of its threads
// as catch-up does: runs of 100 events, each run one op on the committer,
// projected there. Signatures and decoding are left out (the store trusts
// QueueDecodedChain's caller for them), so what is measured is the store's
// append and the projector. The cases differ by who writes: one author,
// two taking turns, and a new author every message. cpu-µs/op is the CPU
// the process spent per event, the store's writer included;
// projector-cpu-ns/op the CPU of the forum's projector alone.
func BenchmarkCatchUp(b *testing.B) {
	for _, c := range catchUpCases {
		b.Run(c.name, func(b *testing.B) {
			defer func(v bool) { verifyCache = v }(verifyCache)
			verifyCache = false // it measures the cache, not its checks
			f := newCatchUpFeed(b, c.author)
			const runLen = 100
			runs := make([][]store.Checked, 0, b.N/runLen+1)
			for i := 0; i < b.N; i += runLen {
				runs = append(runs, f.next(min(runLen, b.N-i)))
			}
			b.ReportAllocs()
			b.ResetTimer()
			f.sw.total, f.sw.n = 0, 0
			cpu := cputime.Now()
			for _, run := range runs {
				f.ingest(run)
			}
			b.ReportMetric(float64((cputime.Now()-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
			b.ReportMetric(f.sw.perEvent(), "projector-cpu-ns/op")
		})
	}
}

var catchUpCases = []struct {
	name   string
	author func(i int) string
}{
	{"one-author", func(int) string { return "alice" }},
	{"two-authors", func(i int) string { return []string{"alice", "bob"}[i%2] }},
	{"new-authors", func(i int) string { return fmt.Sprintf("agent-%d", i) }},
}

// catchUpFeed makes a peer realm's events, in chain order, for a node that
// holds the peer's lobby and one thread in it.
type catchUpFeed struct {
	tb     testing.TB
	s      *Service
	sw     *stopwatch
	author func(i int) string
	at     int64
	seq    uint64
	prev   cid.Cid
	msgs   int
}

func newCatchUpFeed(tb testing.TB, author func(i int) string) *catchUpFeed {
	sw := &stopwatch{}
	s := newTestService(tb, func(st *store.Store) { st.Register(sw) }, func(st *store.Store) { st.Register(sw.stop()) })
	f := &catchUpFeed{tb: tb, s: s, sw: sw, author: author, at: time.Now().UnixMilli()}
	f.ingest([]store.Checked{f.event(evBoardCreated, "human", boardData{ID: 1, Slug: "lobby", Name: "Lobby"})})
	f.ingest([]store.Checked{f.event(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask",
		Body: "Where does the time go?", AuthorKind: "llm"})})
	return f
}

func (f *catchUpFeed) event(typ, who string, d any) store.Checked {
	data, err := protocol.EncodeData(d)
	if err != nil {
		f.tb.Fatal(err)
	}
	f.seq++
	ev := &protocol.Event{Realm: "peer", Seq: f.seq, Type: typ, At: f.at + int64(f.seq), Author: "peer:" + who, Data: data}
	if f.seq > 1 {
		ev.Prev = protocol.Link{Cid: f.prev}
	}
	f.prev = fakeEventCID(f.seq) // the store does not check a decoded event's CID
	return store.Checked{Event: ev, CID: f.prev, Raw: []byte{0xa0}}
}

// fakeEventCID is a CID unique to n, of the kind events have.
func fakeEventCID(n uint64) cid.Cid {
	sum := sha256.Sum256(binary.BigEndian.AppendUint64(nil, n))
	mh, err := multihash.Encode(sum[:], multihash.SHA2_256)
	if err != nil {
		panic(err)
	}
	return cid.NewCidV1(cid.DagCBOR, mh)
}

// next makes the next n messages into the thread, each answering its first.
func (f *catchUpFeed) next(n int) []store.Checked {
	run := make([]store.Checked, n)
	for i := range run {
		f.msgs++
		run[i] = f.event(evMessagePosted, f.author(f.msgs), messageData{Thread: "th_1", N: uint64(f.msgs + 1), Parent: "msg_1",
			Kind: "note", Body: "bench note", Extension: "worker-2", AuthorKind: "llm"})
	}
	return run
}

func (f *catchUpFeed) ingest(run []store.Checked) {
	wait, err := f.s.st.QueueDecodedChain(context.Background(), run, func(*protocol.Event) error { return nil })
	if err != nil {
		f.tb.Fatal(err)
	}
	if n, err := wait(); err != nil || n != len(run) {
		f.tb.Fatalf("ingested %d of %d: %v", n, len(run), err)
	}
}

// stopwatch adds up the CPU time of the projectors registered between it
// and its stop, on the committer's thread, over the events whose
// projection began and ended on one thread.
type stopwatch struct {
	thread int
	start  time.Duration
	total  time.Duration
	n      int
}

func (w *stopwatch) perEvent() float64 {
	if w.n == 0 {
		return 0
	}
	return float64(w.total.Nanoseconds()) / float64(w.n)
}

func (*stopwatch) Prefixes() [][]byte { return nil }

func (w *stopwatch) Apply(*store.Tx, *store.StoredEvent) error {
	w.thread, w.start = cputime.Thread()
	return nil
}

func (w *stopwatch) stop() store.Projector { return stopwatchStop{w} }

type stopwatchStop struct{ w *stopwatch }

func (stopwatchStop) Prefixes() [][]byte { return nil }

func (s stopwatchStop) Apply(*store.Tx, *store.StoredEvent) error {
	if id, now := cputime.Thread(); id == s.w.thread {
		s.w.total += now - s.w.start
		s.w.n++
	}
	return nil
}
