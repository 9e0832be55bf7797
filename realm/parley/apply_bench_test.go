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
// the process spent per event, the store's writer included.
func BenchmarkCatchUp(b *testing.B) {
	for _, c := range []struct {
		name   string
		author func(i int) string
	}{
		{"one-author", func(int) string { return "alice" }},
		{"two-authors", func(i int) string { return []string{"alice", "bob"}[i%2] }},
		{"new-authors", func(i int) string { return fmt.Sprintf("agent-%d", i) }},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkCatchUp(b, c.author) })
	}
}

// fakeCID stands for an event's CID: the store does not check it here.
func fakeCID(b *testing.B, n uint64) cid.Cid {
	sum := sha256.Sum256(binary.BigEndian.AppendUint64(nil, n))
	mh, err := multihash.Encode(sum[:], multihash.SHA2_256)
	if err != nil {
		b.Fatal(err)
	}
	return cid.NewCidV1(cid.DagCBOR, mh)
}

func benchmarkCatchUp(b *testing.B, author func(i int) string) {
	defer func(v bool) { verifyCache = v }(verifyCache)
	verifyCache = false // it measures the cache, not its checks
	var sw stopwatch
	s := newTestService(b, func(st *store.Store) { st.Register(&sw) }, func(st *store.Store) { st.Register(sw.stop()) })
	ctx := context.Background()
	at := time.Now().UnixMilli()
	var prev cid.Cid
	var seq uint64
	event := func(typ, who string, d messageData) store.Checked {
		data, err := protocol.EncodeData(d)
		if err != nil {
			b.Fatal(err)
		}
		seq++
		ev := &protocol.Event{Realm: "peer", Seq: seq, Type: typ, At: at + int64(seq), Author: "peer:" + who, Data: data}
		if seq > 1 {
			ev.Prev = protocol.Link{Cid: prev}
		}
		prev = fakeCID(b, seq)
		return store.Checked{Event: ev, CID: prev, Raw: []byte{0xa0}}
	}
	trust := func(*protocol.Event) error { return nil }
	ingest := func(run []store.Checked) {
		wait, err := s.st.QueueDecodedChain(ctx, run, trust)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := wait(); err != nil || n != len(run) {
			b.Fatalf("ingested %d of %d: %v", n, len(run), err)
		}
	}
	bd, err := protocol.EncodeData(boardData{ID: 1, Slug: "lobby", Name: "Lobby"})
	if err != nil {
		b.Fatal(err)
	}
	seq++
	boardEv := &protocol.Event{Realm: "peer", Seq: seq, Type: evBoardCreated, At: at, Author: "peer:human", Data: bd}
	prev = fakeCID(b, seq)
	ingest([]store.Checked{{Event: boardEv, CID: prev, Raw: []byte{0xa0}}})
	ingest([]store.Checked{event(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "Where does the time go?", AuthorKind: "llm"})})

	const runLen = 100
	runs := make([][]store.Checked, 0, b.N/runLen+1)
	for i := 0; i < b.N; i += runLen {
		run := make([]store.Checked, 0, runLen)
		for j := i; j < b.N && j < i+runLen; j++ {
			run = append(run, event(evMessagePosted, author(j), messageData{Thread: "th_1", N: uint64(j + 2), Parent: "msg_1",
				Kind: "note", Body: "bench note", Extension: "worker-2", AuthorKind: "llm"}))
		}
		runs = append(runs, run)
	}
	b.ReportAllocs()
	b.ResetTimer()
	sw.total, sw.n = 0, 0
	cpu := cputime.Now()
	for _, run := range runs {
		ingest(run)
	}
	b.ReportMetric(float64((cputime.Now()-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	b.ReportMetric(sw.perEvent(), "projector-cpu-ns/op")
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
