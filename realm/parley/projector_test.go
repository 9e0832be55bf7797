package parley

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"relay/protocol"
	"relay/store"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// chainWriter signs one realm's events with a fixed key and clock, so that
// their CIDs, and every record made from them, are the same on every run.
type chainWriter struct {
	tb    testing.TB
	st    *store.Store
	realm string
	key   ed25519.PrivateKey
	seq   uint64
	prev  cid.Cid
	at    int64
	runs  *pendingRun // nil: each event is stored alone
}

// pendingRun gathers one realm's consecutive events into a run stored by
// one op, as catch-up stores them.
type pendingRun struct {
	w    *chainWriter
	raws [][]byte
}

// flush stores the gathered run.
func (r *pendingRun) flush() {
	if r == nil || len(r.raws) == 0 {
		return
	}
	r.w.tb.Helper()
	n, err := r.w.st.IngestChain(context.Background(), r.raws, func(*protocol.Event) error { return nil })
	if err != nil || n != len(r.raws) {
		r.w.tb.Fatalf("stored %d of a run of %d: %v", n, len(r.raws), err)
	}
	r.raws = nil
}

func newChainWriter(tb testing.TB, st *store.Store, realm string, seed byte, runs *pendingRun) *chainWriter {
	return &chainWriter{tb: tb, st: st, realm: realm, key: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32)),
		at: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli() + int64(seed)*7, runs: runs}
}

// sign makes the realm's next event without storing it.
func (c *chainWriter) sign(typ, author string, data any) ([]byte, cid.Cid) {
	c.tb.Helper()
	b, err := protocol.EncodeData(data)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.seq++
	if !strings.HasPrefix(author, protocol.HumanPrefix+":") { // the operator is human:<name> in every realm
		author = c.realm + ":" + author
	}
	ev := &protocol.Event{Realm: c.realm, Seq: c.seq, Type: typ, At: c.at, Author: author, Data: b}
	if c.seq > 1 {
		ev.Prev = protocol.Link{Cid: c.prev}
	}
	raw, id, err := ev.Sign(c.key)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.prev = id
	c.at += 1234 // a time with milliseconds: the records keep them
	return raw, id
}

func (c *chainWriter) ingest(raw []byte) {
	c.tb.Helper()
	if c.runs != nil {
		if c.runs.w != c {
			c.runs.flush()
			c.runs.w = c
		}
		c.runs.raws = append(c.runs.raws, raw)
		return
	}
	if _, err := c.st.Ingest(context.Background(), raw, func(*protocol.Event) error { return nil }); err != nil {
		c.tb.Fatal(err)
	}
}

// emit signs and stores the realm's next event.
func (c *chainWriter) emit(typ, author string, data any) cid.Cid {
	c.tb.Helper()
	raw, id := c.sign(typ, author, data)
	c.ingest(raw)
	return id
}

// newFixedService is newTestService with a fixed key and clock, so that
// the events it authors are the same on every run.
func newFixedService(tb testing.TB) *Service {
	tb.Helper()
	cfg := store.DefaultConfig("")
	cfg.InMemory = true
	cfg.Realm = testRealm
	cfg.Key = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	cfg.Now = func() time.Time { at = at.Add(1001 * time.Millisecond); return at } // on the committer only
	st, err := store.Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	s := New(st, Config{Realm: testRealm, Logger: cfg.Logger})
	if err := s.Bootstrap(context.Background(), "test:human"); err != nil {
		tb.Fatal(err)
	}
	return s
}

// projectionScenario runs every kind of event the projector folds: local
// posts (the poster hands the projector its thread), a thread of another
// realm caught up from its chain, with claims refuted, superseded, attested
// and sealed, state changes, pins and moderation, and replies from a third
// realm decided after and before they arrive.
// With runs, each realm's consecutive events are stored in one op.
func projectionScenario(t *testing.T, s *Service, runs bool) {
	ctx := context.Background()
	alice, bob := agent(t, "alice"), agent(t, "bob")
	opened, err := s.post(ctx, alice, "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "Where does the time go?\nIn the committer."}, "")
	if err != nil {
		t.Fatal(err)
	}
	th := protocol.KeyRef(opened.Thread.ID)
	for i, step := range []struct {
		p   string
		env protocol.Envelope
	}{
		{"bob", protocol.Envelope{Kind: protocol.ActNote, Body: "A first note.", Parent: protocol.KeyRef(opened.Message.ID), From: &protocol.From{Extension: "worker-2"}}},
		{"bob", protocol.Envelope{Kind: protocol.ActNote, Body: "A second note by the same author."}},
		{"alice", protocol.Envelope{Kind: protocol.ActRequest, Body: "Back to the <author> & co."}},
		{"bob", protocol.Envelope{Kind: protocol.ActAnswer, Body: "In the JSON.", Claims: []protocol.ClaimInput{{Statement: "encoding costs µs"}}}},
		{"alice", protocol.Envelope{Kind: protocol.ActNote, Body: "Thanks."}},
	} {
		p := alice
		if step.p == "bob" {
			p = bob
		}
		env := step.env
		env.Thread = th
		if _, err := s.post(ctx, p, "", &env, ""); err != nil {
			t.Fatalf("local step %d: %v", i, err)
		}
	}
	if _, err := s.post(ctx, bob, "lobby", &protocol.Envelope{Kind: protocol.ActNote, Body: "Another thread."}, ""); err != nil {
		t.Fatal(err)
	}

	var pending *pendingRun
	if runs {
		pending = &pendingRun{}
	}
	defer pending.flush()
	alpha := newChainWriter(t, s.st, "alpha", 2, pending)
	beta := newChainWriter(t, s.st, "beta", 3, pending)
	ev := []protocol.Evidence{{Kind: "url", Value: "https://example.org/a?b=1&c=<2>", Note: "seen"}}
	alpha.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General", Description: "Alpha's board"})
	alpha.emit(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "Is the cache right?\nSecond line.", AuthorKind: "llm"})
	alpha.emit(evMessagePosted, "bob", messageData{Thread: "th_1", N: 2, Parent: "msg_1", Kind: "note", Body: "Yes.", Extension: "w1", AuthorKind: "llm"})
	alpha.emit(evMessagePosted, "bob", messageData{Thread: "th_1", N: 3, Kind: "request", Body: "Again, by the same author.", AuthorKind: "llm"})
	alpha.emit(evMessagePosted, "alice", messageData{Thread: "th_1", N: 4, Parent: "msg_3", Kind: "answer", Body: "Two claims.", AuthorKind: "user",
		Provenance: map[string]any{"model": "m", "n": uint64(3)}, Evidence: ev,
		Claims: []claimData{{N: 1, Statement: "one", Evidence: ev}, {N: 2, Statement: "two"}},
		Change: &protocol.Change{To: protocol.StateAnswered, Origin: protocol.OriginUser, Confirmed: true}})
	alpha.emit(evMessagePosted, "carol", messageData{Thread: "th_1", N: 5, Kind: "refute", Body: "Not one.", AuthorKind: "llm", Refutes: []string{"cl_1"}, Evidence: ev})
	alpha.emit(evMessagePosted, "alice", messageData{Thread: "th_1", N: 6, Kind: "refine", Body: "Two, better.", AuthorKind: "user",
		RelatesTo: []string{"cl_2", "msg_2"}, Claims: []claimData{{N: 3, Statement: "two, refined"}}})
	alpha.emit(evClaimAttested, "bob", attestData{Claim: "cl_3", Verdict: "supports", Note: "checked", Extension: "w1"})
	alpha.emit(evClaimSealed, "human", sealData{Claim: "cl_3"})
	alpha.emit(evThreadState, "human", stateData{Thread: "th_1", Via: "close", Note: "done",
		Change: protocol.Change{To: protocol.StateClosed, Origin: protocol.OriginUser, Confirmed: true, Before: protocol.StateAnswered}})
	alpha.emit(evThreadPinned, "human", pinData{Thread: "th_1", Pinned: true})
	alpha.emit(evThreadModerat, "human", moderateData{Thread: "th_1", LLMReplyForbidden: true})
	alpha.emit(evThreadState, "human", stateData{Thread: "th_1", Via: "reopen",
		Change: protocol.Change{To: protocol.StateAnswered, Origin: protocol.OriginLLM}})
	alpha.emit(evThreadState, "human", stateData{Thread: "th_1", Via: "confirm",
		Change: protocol.Change{To: protocol.StateAnswered, Origin: protocol.OriginLLM, Confirmed: true}})
	alpha.emit(evThreadOpened, "bob", messageData{Thread: "th_2", Board: 1, N: 7, Kind: "propose", Body: "A second thread", AuthorKind: "llm"})
	alpha.emit(evMessagePosted, "alice", messageData{Thread: "th_2", N: 8, Kind: "note", Body: "Joined.", AuthorKind: "llm"})

	// beta's replies into alpha's thread: one decided after it arrives,
	// one refused and one accepted before they arrive, one left pending.
	r1 := beta.emit(evMessagePosted, "dan", messageData{Thread: "alpha:th_1", N: 1, Parent: "alpha:msg_4", Kind: "note", Body: "From beta.", AuthorKind: "llm"})
	alpha.emit(evReplyAccepted, "dan", decisionData{Thread: "th_1", Message: "beta:msg_1", CID: r1.String()})
	raw2, r2 := beta.sign(evMessagePosted, "dan", messageData{Thread: "alpha:th_1", N: 2, Kind: "note", Body: "Refused first.", AuthorKind: "llm"})
	raw3, r3 := beta.sign(evMessagePosted, "erin", messageData{Thread: "alpha:th_1", N: 3, Kind: "decide", Body: "Accepted first.", AuthorKind: "llm"})
	alpha.emit(evReplyRefused, "dan", decisionData{Thread: "th_1", Message: "beta:msg_2", CID: r2.String(), Reason: "thread_closed", Error: "closed"})
	alpha.emit(evReplyAccepted, "erin", decisionData{Thread: "th_1", Message: "beta:msg_3", CID: r3.String(),
		Change: &protocol.Change{To: protocol.StateDecided, Origin: protocol.OriginLLM}})
	beta.ingest(raw2)
	beta.ingest(raw3)
	// The accepted reply is held now: its acceptance is projected next, by
	// this pass or by the store's own, before any later event, so that the
	// records' sequences do not hang on when the store's pass runs.
	pending.flush()
	s.st.Unpark(ctx)
	beta.emit(evMessagePosted, "dan", messageData{Thread: "alpha:th_2", N: 4, Kind: "note", Body: "Pending.", AuthorKind: "llm"})
	alpha.emit(evMessagePosted, "dan", messageData{Thread: "th_2", N: 9, Kind: "note", Body: "A newcomer to th_2.", AuthorKind: "llm"})

	// A thread the human closed while it awaited a reply, then its
	// creator's reopen, a proposal: the thread stays locked, so it is not
	// counted as waiting (parley/2).
	alpha.emit(evThreadOpened, "bob", messageData{Thread: "th_3", Board: 1, N: 10, Kind: "ask", Body: "Closed, then reopened by a proposal.", AuthorKind: "llm"})
	alpha.emit(evThreadState, "human", stateData{Thread: "th_3", Via: "close",
		Change: protocol.Change{To: protocol.StateClosed, Origin: protocol.OriginUser, Confirmed: true, Before: protocol.StateOpen}})
	alpha.emit(evThreadState, "bob", stateData{Thread: "th_3", Via: "reopen",
		Change: protocol.Change{To: protocol.StateOpen, Origin: protocol.OriginLLM}})

	// beta's agent supports cl_2 after alpha's refine superseded it, by the
	// events' times, not having received the refine: the attestation is
	// shown, refused (parley/3).
	beta.at += 5000
	beta.emit(evClaimAttested, "dan", attestData{Claim: "alpha:cl_2", Verdict: "supports"})
	// And a refute act of alpha's, after the supersede: shown refused
	// (parley/5).
	alpha.emit(evMessagePosted, "carol", messageData{Thread: "th_2", N: 11, Kind: "refute", Body: "Not two.", AuthorKind: "llm",
		Refutes: []string{"cl_2"}, Evidence: ev})
}

// dumpProjection lists every record of the forum, key and value.
func dumpProjection(t *testing.T, st *store.Store) []byte {
	t.Helper()
	var out bytes.Buffer
	err := st.View(func(tx *store.Tx) error {
		for _, pfx := range [][]byte{pfxAll, []byte("l/pa/")} {
			if err := tx.Iterate(pfx, false, func(k, v []byte) error {
				fmt.Fprintf(&out, "%q\n\t%q\n", k, v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// The projector writes exactly the records it wrote when the golden file
// was made, byte for byte, for every kind of event, whether each event is
// stored by an op of its own or with the rest of its run (as catch-up
// stores them); and a rebuild from the log writes them again. A change to
// what the projector stores, or how it encodes it, fails here: stored
// records must stay readable as they are.
func TestProjectionGolden(t *testing.T) {
	for _, runs := range []bool{false, true} {
		t.Run(fmt.Sprintf("runs=%v", runs), func(t *testing.T) { testProjectionGolden(t, runs) })
	}
}

func testProjectionGolden(t *testing.T, runs bool) {
	s := newFixedService(t)
	if _, err := s.st.EnsureProjections(context.Background()); err != nil {
		t.Fatal(err)
	}
	projectionScenario(t, s, runs)
	s.st.Unpark(context.Background()) // an acceptance waits for its reply
	if n := len(s.recs.ops); n != 0 {
		t.Fatalf("%d ops' changes still held after their ops ended", n)
	}
	got := dumpProjection(t, s.st)
	golden := filepath.Join("testdata", "projection.golden")
	if *update && !runs {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the projection differs from %s (go test -run TestProjectionGolden -update to rewrite it):\n%s", golden, firstDiff(got, want))
	}
	if err := s.st.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again := dumpProjection(t, s.st); !bytes.Equal(again, want) {
		t.Fatalf("the projection after a rebuild differs from %s:\n%s", golden, firstDiff(again, want))
	}
}

// firstDiff shows the first line where got and want part.
func firstDiff(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) {
			return fmt.Sprintf("line %d:\ngot:  %s\nwant: %s", i+1, gl, wl)
		}
	}
	return "(same lines)"
}

// participationTests are who writes a thread's messages, in turn; the
// participation index must list each of them once, however the turns go.
var participationTests = []struct {
	name    string
	authors []string
}{
	{"one", []string{"alice"}},
	{"same author again", []string{"alice", "alice", "alice"}},
	{"turns", []string{"alice", "bob", "alice", "bob"}},
	{"back after others", []string{"bob", "bob", "carol", "alice", "bob"}},
	{"new every time", []string{"bob", "carol", "dan"}},
}

// The participation index holds every author of a thread's messages, the
// opener included, whether or not their key was written again (join skips
// it when the thread's last message was theirs already), and only them.
// Only this realm's events are indexed: a thread written by another
// realm's identities indexes nothing here.
func TestParticipationIndexed(t *testing.T) {
	ctx := context.Background()
	for _, tt := range participationTests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestService(t)
			opened, err := s.post(ctx, agent(t, "alice"), "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "Where does the time go?"}, "")
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{"test:alice": true} // the opener
			for _, a := range tt.authors {
				env := &protocol.Envelope{Kind: protocol.ActNote, Body: "a note from " + a, Thread: protocol.KeyRef(opened.Thread.ID)}
				if _, err := s.post(ctx, agent(t, a), "", env, ""); err != nil {
					t.Fatal(err)
				}
				want["test:"+a] = true
			}
			if got := participants(t, s, rid{testRealm, 1}); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("participants %v, want %v", got, want)
			}

			i := 0
			f := newCatchUpFeed(t, func(int) string { a := tt.authors[i%len(tt.authors)]; i++; return a })
			for range tt.authors {
				f.ingest(f.next(1))
			}
			if got := participants(t, f.s, rid{"peer", 1}); len(got) != 0 {
				t.Fatalf("another realm's thread indexed %v", got)
			}
		})
	}
}

// participants is who the participation index lists, by thread tid; it
// fails on a key of another thread.
func participants(t *testing.T, s *Service, tid rid) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	err := s.st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxPart, false, func(k, _ []byte) error {
			who, thread, _ := bytes.Cut(k[len(pfxPart):], []byte{0})
			if got := decodeRid(thread); got != tid {
				t.Errorf("key %q: thread %v", k, got)
			}
			got[string(who)] = true
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The key builders write what key() writes from the parts.
func TestKeyBuilders(t *testing.T) {
	c := fakeEventCID(7)
	for _, tt := range []struct {
		got, want []byte
	}{
		{ridKey(pfxThread, rid{"alpha", 12}), key(pfxThread, rid{"alpha", 12}.bytes())},
		{ridKey(pfxThreadMs, rid{"", 1 << 40}, 99), key(pfxThreadMs, rid{"", 1 << 40}.bytes(), u64(99))},
		{ridKey(pfxThreadCl, rid{"a:b", 3}, 5, 0), key(pfxThreadCl, rid{"a:b", 3}.bytes(), u64(5), u64(0))},
		{cidKey(c), key(pfxCID, c.Bytes())},
		{rid{"realm", 258}.bytes(), []byte("realm\x00\x00\x00\x00\x00\x00\x00\x01\x02")},
	} {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%q, want %q", tt.got, tt.want)
		}
	}
}

// A run of events stored by one op leaves the records that the same events
// stored one op each leave, with more threads and boards changed in the op
// than opChanges keeps without an index, each changed many times.
func TestRunMatchesEventByEvent(t *testing.T) {
	var dumps [2][]byte
	for i, runs := range []bool{false, true} {
		s := newFixedService(t)
		var pending *pendingRun
		if runs {
			pending = &pendingRun{}
		}
		w := newChainWriter(t, s.st, "alpha", 2, pending)
		const boards, threads = 3, 2 * indexAbove
		for b := 1; b <= boards; b++ {
			w.emit(evBoardCreated, "human", boardData{ID: uint64(b), Slug: fmt.Sprintf("b%d", b), Name: "Board"})
		}
		n := uint64(0)
		for th := 1; th <= threads; th++ {
			n++
			w.emit(evThreadOpened, fmt.Sprintf("a%d", th%5), messageData{Thread: fmt.Sprintf("th_%d", th), Board: uint64(1 + th%boards),
				N: n, Kind: "ask", Body: "Opening", AuthorKind: "llm"})
		}
		for round := range 3 {
			for th := 1; th <= threads; th++ {
				n++
				d := messageData{Thread: fmt.Sprintf("th_%d", th), N: n, Kind: "note", Body: "More", AuthorKind: "llm"}
				if round == 1 && th%4 == 0 {
					d.Kind = "answer"
					d.Change = &protocol.Change{To: protocol.StateAnswered, Origin: protocol.OriginLLM}
				}
				w.emit(evMessagePosted, fmt.Sprintf("a%d", (th+round)%3), d)
			}
			w.emit(evThreadPinned, "human", pinData{Thread: fmt.Sprintf("th_%d", round+1), Pinned: true})
		}
		pending.flush()
		if n := len(s.recs.ops); n != 0 {
			t.Fatalf("%d ops' changes still held after their ops ended", n)
		}
		dumps[i] = dumpProjection(t, s.st)
	}
	if !bytes.Equal(dumps[0], dumps[1]) {
		t.Fatalf("stored as one run, the records differ:\n%s", firstDiff(dumps[1], dumps[0]))
	}
}

// goldenVersions pins each projector version to the projection it makes of
// TestProjectionGolden's scenario (the SHA-256 of projection.golden). A
// change to what the projector derives rewrites the golden file; this test
// then fails until the version is bumped, so that stores projected by the
// old code are rebuilt (store.EnsureProjections), and the new pair added.
var goldenVersions = map[string]string{
	"parley/1": "7e5019decd131a0d05522b33fef11016a5976133ef86c3bf2d641ce50e0bea36",
	// The scenario's th_3 of alpha: a proposed reopen of a confirmed close.
	"parley/2": "a9f104545c88c0931c062d22deb226ece07334069b7c6d384b27b65e21faf2d8",
	// beta's attestation of alpha's cl_2 after the refine superseded it.
	"parley/3": "ee161fb955440a821cda307fc5ac6309b30d6d1a4def7b6819c3dc4d96c3d0a0",
	// beta's reply accepted before it arrived: the acceptance waits for it.
	"parley/4": "7dab7d58aa9e06bd0d80fca6019cae00ace94b77f0232044f4ad70998d79300b",
	// A refute act of alpha after the supersede of the claim it names.
	"parley/5": "de9b4b68e7fd74c8a057ef828dd4ab734dac701f555bd80a7f165e89b88aaa0b",
	// beta's accepted reply, alpha's th_1's last message, dated by itself;
	// and the scenario projects the acceptance as soon as its reply is held.
	"parley/6": "5bf53ab2fe522ef8fb667f68c78b1f5289dd7496e0d30b60f7a9b90698c0c8ef",
	// That last message dated by its acceptance again.
	"parley/7": "300c3b24cb1488bad46ce3ac0f8f8fcc73806d4f53dba7d3156cae4235e91e6a",
	// Acceptances carry the reply's effect, and facts on a refused realm's
	// claims are kept aside: neither is in the scenario, which blocks no
	// realm, so it projects as parley/7 did.
	"parley/8": "300c3b24cb1488bad46ce3ac0f8f8fcc73806d4f53dba7d3156cae4235e91e6a",
	// Attestations name their attester's realm.
	"parley/9": "fcf170a241da2655d28290ac9f5cf11275da2973066742d266f646d2bd01a9c0",
	// Threads indexed in the orders they are listed in.
	"parley/10": "462cbae2d09f7a8b2aeb3743c4f37f3338313e4032eee118623e4720a1591e97",
	// A board's threads no longer indexed apart from their order.
	"parley/11": "166e95fc7b1f9c05570563b7791cf27d5dfaa62a53e7eb07e104a29d4bb79a89",
	// Who set a thread's state, and each history entry's setter, name
	// their realm.
	"parley/12": "7d1f88af486c8e4a9680e5fcfe35c7aef283c79262fbf178d412150f07302bba",
}

func TestProjectionVersionPinsGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "projection.golden"))
	if err != nil {
		t.Fatal(err)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(b))
	v := projector{}.ProjectionVersion()
	if goldenVersions[v] != sum {
		t.Fatalf("testdata/projection.golden (sha256 %s) is not what projector version %q makes (%s): bump ProjectionVersion and pin the new pair in goldenVersions", sum, v, goldenVersions[v])
	}
}

// TestForeignAuthorRefused: a realm signs for its own identities and its
// own human only; its event naming another realm's identity as author is
// refused when projected, and nothing of it is held.
func TestForeignAuthorRefused(t *testing.T) {
	s := newFixedService(t)
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, 32))
	for _, author := range []string{string(testRealm) + ":alice", "other:bob"} {
		data, err := protocol.EncodeData(messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "Whose?", AuthorKind: "llm"})
		if err != nil {
			t.Fatal(err)
		}
		ev := &protocol.Event{Realm: "away", Seq: 1, Type: evThreadOpened, At: time.Now().UnixMilli(), Author: author, Data: data}
		raw, _, err := ev.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.st.Ingest(context.Background(), raw, func(*protocol.Event) error { return nil }); err == nil {
			t.Errorf("realm away signing for %s: taken", author)
		}
	}
	for author, ok := range map[string]bool{"away:x": true, "human:operator": true, "": true, "awayx:y": false, "away": false, "other:away:x": false} {
		if protocol.AuthoredBy("away", author) != ok {
			t.Errorf("AuthoredBy(away, %q) = %v", author, !ok)
		}
	}
}

// TestRecordsImmutable: another realm's event may not make again a
// message, a claim or a thread it made (other realms' attestations and
// acceptances refer to them as they were), nor refute outside a refute act
// with evidence; each is refused, and what was held stays.
func TestRecordsImmutable(t *testing.T) {
	s := newFixedService(t)
	away := newChainWriter(t, s.st, "away", 5, nil)
	away.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	away.emit(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "the original", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "it holds"}}})
	ev := []protocol.Evidence{{Kind: "note", Value: "seen"}}
	for _, tc := range []struct {
		name, typ string
		d         messageData
	}{
		{"a message again", evMessagePosted, messageData{Thread: "th_1", N: 1, Kind: "note", Body: "swapped", AuthorKind: "llm"}},
		{"a claim again", evMessagePosted, messageData{Thread: "th_1", N: 2, Kind: "note", Body: "x", AuthorKind: "llm",
			Claims: []claimData{{N: 1, Statement: "rewritten"}}}},
		{"a thread again", evThreadOpened, messageData{Thread: "th_1", Board: 1, N: 3, Kind: "ask", Body: "reopened", AuthorKind: "llm"}},
		{"refutes in a note", evMessagePosted, messageData{Thread: "th_1", N: 4, Kind: "note", Body: "x", AuthorKind: "llm",
			Refutes: []string{"cl_1"}, Evidence: ev}},
		{"a refute without evidence", evMessagePosted, messageData{Thread: "th_1", N: 5, Kind: "refute", Body: "x", AuthorKind: "llm",
			Refutes: []string{"cl_1"}}},
	} {
		seq, prev, at := away.seq, away.prev, away.at
		raw, _ := away.sign(tc.typ, "alice", tc.d)
		if _, err := s.st.Ingest(context.Background(), raw, func(*protocol.Event) error { return nil }); err == nil {
			t.Errorf("%s: taken", tc.name)
		}
		away.seq, away.prev, away.at = seq, prev, at
	}
	away.emit(evMessagePosted, "bob", messageData{Thread: "th_1", N: 2, Kind: "refute", Body: "no", AuthorKind: "llm", Refutes: []string{"cl_1"}, Evidence: ev})
	var c claimRec
	var m messageRec
	if err := s.st.View(func(tx *store.Tx) error {
		if _, err := tx.GetJSON(ridKey(pfxClaim, rid{"away", 1}), &c); err != nil {
			return err
		}
		_, err := tx.GetJSON(ridKey(pfxMessage, rid{"away", 1}), &m)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if c.Statement != "it holds" || c.State != protocol.ClaimRefuted || m.Body != "the original" {
		t.Fatalf("after the refused events: claim %q %s, message %q", c.Statement, c.State, m.Body)
	}
}

// TestEarlyWordOfAnotherRealm: a decision on a reply that has not arrived
// is kept by its deciding realm, so that a realm whose thread the reply is
// not in cannot take the place of the word of the reply's thread's realm.
func TestEarlyWordOfAnotherRealm(t *testing.T) {
	s := newFixedService(t)
	home := newChainWriter(t, s.st, "home", 5, nil)
	rep := newChainWriter(t, s.st, "rep", 6, nil)
	evil := newChainWriter(t, s.st, "evil", 7, nil)
	home.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	home.emit(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "q", AuthorKind: "llm"})
	evil.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	evil.emit(evThreadOpened, "eve", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "mine", AuthorKind: "llm"})
	raw, c := rep.sign(evMessagePosted, "bob", messageData{Thread: "home:th_1", N: 1, Kind: "note", Body: "a reply", AuthorKind: "llm"})
	// Both words come before the reply: the other realm's first.
	evil.emit(evReplyRefused, "rep:bob", decisionData{Thread: "th_1", Message: "rep:msg_1", CID: c.String(), Reason: "forbidden", Error: "no"})
	home.emit(evReplyRefused, "rep:bob", decisionData{Thread: "th_1", Message: "rep:msg_1", CID: c.String(), Reason: "thread_closed", Error: "closed"})
	rep.ingest(raw)
	var m messageRec
	if err := s.st.View(func(tx *store.Tx) error {
		_, err := tx.GetJSON(key(pfxMessage, rid{"rep", 1}.bytes()), &m)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if m.Status != ReplyRefused || m.Refusal == nil || m.Refusal.Reason != "thread_closed" {
		t.Fatalf("the reply: %s %+v, want refused by home (thread_closed)", m.Status, m.Refusal)
	}
}
