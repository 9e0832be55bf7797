package parley

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/ipfs/go-cid"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// A claim's facts come from many realms: attestations from anyone, refute
// acts from any realm's threads, a seal and a supersede from its home. Each
// realm's own chain arrives in order, but the realms interleave however the
// network delivers them, so a replica must end with the same claim record
// whatever the interleaving.

// claimFactStep is one fact about alpha:cl_1, authored by one realm at a
// time offset (milliseconds after the claim) the test chooses.
type claimFactStep struct {
	name string
	at   int64
}

// The facts a claimOrderTest picks from.
const (
	stepSupports     = "supports"      // beta: supports
	stepInconclusive = "inconclusive"  // delta: inconclusive
	stepRefutes      = "refutes"       // gamma: refutes, with evidence
	stepRefuteAct    = "refute act"    // eps: a refute act naming the claim
	stepSeal         = "seal"          // alpha: seals the claim
	stepSupersede    = "supersede"     // alpha: its author refines it
	stepLateSupports = "late supports" // zeta: supports
)

type claimOrderTest struct {
	name  string
	steps []claimFactStep
	// What every order must end with: the state, the attestations shown (by
	// attester's realm, in the order shown; "!" after the realm: shown as
	// refused, not counted), and whether the claim is
	// sealed, refuted by the refute act and superseded.
	state      protocol.ClaimState
	shown      []string
	sealed     bool
	refutedBy  bool
	superseded bool
	// refuteRefused: the refute act is shown refused (claim_superseded).
	refuteRefused bool
}

var claimOrderTests = []claimOrderTest{
	{
		name: "every fact",
		steps: []claimFactStep{{stepSupports, 10}, {stepInconclusive, 10}, {stepRefutes, 20}, {stepRefuteAct, 25},
			{stepSeal, 30}, {stepSupersede, 40}, {stepLateSupports, 50}},
		state: protocol.ClaimSuperseded, shown: []string{"beta|delta", "beta|delta", "gamma", "zeta!"}, sealed: true, refutedBy: true, superseded: true,
	},
	{
		name:  "attestations race a supersede",
		steps: []claimFactStep{{stepSupports, 10}, {stepSupersede, 20}, {stepLateSupports, 30}, {stepInconclusive, 40}},
		state: protocol.ClaimSuperseded, shown: []string{"beta", "zeta!", "delta!"}, superseded: true,
	},
	{
		name:  "a refutation races a seal",
		steps: []claimFactStep{{stepInconclusive, 5}, {stepSupports, 10}, {stepSeal, 20}, {stepRefutes, 30}, {stepRefuteAct, 40}},
		state: protocol.ClaimVerified, shown: []string{"delta", "beta", "gamma"}, sealed: true, refutedBy: true,
	},
	{
		name:  "support races a refutation",
		steps: []claimFactStep{{stepRefutes, 10}, {stepSupports, 20}, {stepInconclusive, 30}},
		state: protocol.ClaimRefuted, shown: []string{"gamma", "beta", "delta"},
	},
	{
		name:  "a seal after the supersede",
		steps: []claimFactStep{{stepRefutes, 10}, {stepSupersede, 20}, {stepSupports, 25}, {stepSeal, 30}, {stepRefuteAct, 35}},
		state: protocol.ClaimSuperseded, shown: []string{"gamma", "beta!"}, superseded: true, refuteRefused: true,
	},
}

// Every order of a claim's facts, each realm's chain in its own order,
// leaves the claim as get_claims_id shows it, and as it is stored, the same.
func TestClaimFactsAnyOrder(t *testing.T) {
	for _, tt := range claimOrderTests {
		t.Run(tt.name, func(t *testing.T) {
			orders := claimOrders(len(tt.steps), 30, rand.New(rand.NewPCG(1, uint64(len(tt.name)))))
			var wantOut, wantRec []byte
			var first []int
			for _, order := range orders {
				order = chainOrder(tt.steps, order)
				out, rec := claimAfter(t, tt.steps, order)
				if wantOut == nil {
					wantOut, wantRec, first = out, rec, order
					checkClaimOut(t, tt, out)
					continue
				}
				if !bytes.Equal(out, wantOut) {
					t.Fatalf("facts in order %v show\n%s\nin order %v\n%s", stepNames(tt.steps, order), out, stepNames(tt.steps, first), wantOut)
				}
				if !bytes.Equal(rec, wantRec) {
					t.Fatalf("facts in order %v store\n%s\nin order %v\n%s", stepNames(tt.steps, order), rec, stepNames(tt.steps, first), wantRec)
				}
			}
		})
	}
}

func stepNames(steps []claimFactStep, order []int) []string {
	var out []string
	for _, i := range order {
		out = append(out, steps[i].name)
	}
	return out
}

// claimOrders is every order of n facts when there are at most max, else
// the order given, its reverse and random ones, max in all.
func claimOrders(n, max int, rng *rand.Rand) [][]int {
	var all [][]int
	var permute func(p []int, k int)
	permute = func(p []int, k int) {
		if len(all) > max {
			return
		}
		if k == len(p) {
			all = append(all, append([]int(nil), p...))
			return
		}
		for i := k; i < len(p); i++ {
			p[k], p[i] = p[i], p[k]
			permute(p, k+1)
			p[k], p[i] = p[i], p[k]
		}
	}
	id := make([]int, n)
	for i := range id {
		id[i] = i
	}
	permute(append([]int(nil), id...), 0)
	if len(all) <= max {
		return all
	}
	rev := make([]int, n)
	for i := range rev {
		rev[i] = n - 1 - i
	}
	out := [][]int{id, rev}
	for len(out) < max {
		out = append(out, rng.Perm(n))
	}
	return out
}

// chainOrder keeps alpha's facts in its chain's order: wherever order puts
// one, the first of them not yet stored goes there.
func chainOrder(steps []claimFactStep, order []int) []int {
	var alpha []int
	for i, st := range steps {
		if st.name == stepSeal || st.name == stepSupersede {
			alpha = append(alpha, i)
		}
	}
	out := make([]int, 0, len(order))
	for _, i := range order {
		if steps[i].name == stepSeal || steps[i].name == stepSupersede {
			i, alpha = alpha[0], alpha[1:]
		}
		out = append(out, i)
	}
	return out
}

// claimAfter stores alpha's claim cl_1 (and eps's thread, where eps refutes
// it), then the facts in the order given, alpha's own in their chain's
// order; it returns get_claims_id's answer and the stored record.
func claimAfter(t *testing.T, steps []claimFactStep, order []int) (out, rec []byte) {
	t.Helper()
	s := newTestService(t)
	defer s.st.Close() // now, not at the test's end: each in-memory store holds its memtable
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	writer := map[string]*chainWriter{}
	for i, r := range []string{"alpha", "beta", "gamma", "delta", "eps", "zeta"} {
		writer[r] = newChainWriter(t, s.st, r, byte(2+i), nil)
	}
	at := func(w *chainWriter, ms int64) *chainWriter { w.at = base + ms; return w }
	facts := int64(5000) // the facts come after the claim
	ev := []protocol.Evidence{{Kind: "log", Value: "failed on run 3"}}

	alpha := at(writer["alpha"], 0)
	alpha.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	alpha.emit(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "Is it fast?", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "it is fast", Evidence: ev}}})
	eps := at(writer["eps"], 1)
	eps.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	eps.emit(evThreadOpened, "erin", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "About alpha's claim", AuthorKind: "llm"})

	// Each fact is signed in its realm's chain, in the order of steps.
	raws := make([][]byte, len(steps))
	for i, st := range steps {
		switch st.name {
		case stepSupports:
			raws[i], _ = at(writer["beta"], facts+st.at).sign(evClaimAttested, "bob", attestData{Claim: "alpha:cl_1", Verdict: "supports"})
		case stepInconclusive:
			raws[i], _ = at(writer["delta"], facts+st.at).sign(evClaimAttested, "dan", attestData{Claim: "alpha:cl_1", Verdict: "inconclusive", Note: "cannot tell"})
		case stepRefutes:
			raws[i], _ = at(writer["gamma"], facts+st.at).sign(evClaimAttested, "gus", attestData{Claim: "alpha:cl_1", Verdict: "refutes", Evidence: ev})
		case stepRefuteAct:
			raws[i], _ = at(eps, facts+st.at).sign(evMessagePosted, "erin", messageData{Thread: "th_1", N: 2, Kind: "refute", Body: "Not fast.",
				AuthorKind: "llm", Refutes: []string{"alpha:cl_1"}, Evidence: ev})
		case stepSeal:
			raws[i], _ = at(alpha, facts+st.at).sign(evClaimSealed, "human", sealData{Claim: "cl_1"})
		case stepSupersede:
			raws[i], _ = at(alpha, facts+st.at).sign(evMessagePosted, "alice", messageData{Thread: "th_1", N: 2, Kind: "refine", Body: "Sharper.",
				AuthorKind: "llm", RelatesTo: []string{"cl_1"}, Claims: []claimData{{N: 2, Statement: "it is fast when warm"}}})
		case stepLateSupports:
			raws[i], _ = at(writer["zeta"], facts+st.at).sign(evClaimAttested, "zoe", attestData{Claim: "alpha:cl_1", Verdict: "supports"})
		default:
			t.Fatalf("no step %q", st.name)
		}
	}
	for _, i := range order {
		if _, err := s.st.Ingest(context.Background(), raws[i], func(*protocol.Event) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}

	res, err := s.getClaim(context.Background(), nil, claimIDIn{ID: "alpha:cl_1"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err = json.MarshalIndent(res, "", "  "); err != nil {
		t.Fatal(err)
	}
	err = s.st.View(func(tx *store.Tx) error {
		var err error
		rec, err = tx.Get(key(pfxClaim, rid{"alpha", 1}.bytes()))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, rec
}

// checkClaimOut checks the claim against what the test expects.
func checkClaimOut(t *testing.T, tt claimOrderTest, out []byte) {
	t.Helper()
	var res ClaimResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	c := res.Claim
	var shown []string
	for _, a := range c.Attestations {
		by := strings.SplitN(a.By.Identity, ":", 2)[0]
		switch a.Refused {
		case "":
		case string(protocol.ReasonClaimSuperseded):
			by += "!"
		default:
			t.Fatalf("attestation refused for %q", a.Refused)
		}
		shown = append(shown, by)
	}
	ok := c.State == tt.state && len(shown) == len(tt.shown) &&
		(c.SealedAt != nil) == tt.sealed && (len(c.RefutedBy) > 0) == tt.refutedBy && (c.SupersededBy != nil) == tt.superseded
	for i := 0; ok && i < len(shown); i++ {
		ok = strings.Contains("|"+tt.shown[i]+"|", "|"+shown[i]+"|")
	}
	if !ok {
		t.Fatalf("claim %s, attestations by %v; want %s, %v, sealed %v, refuted by the act %v, superseded %v",
			c.State, shown, tt.state, tt.shown, tt.sealed, tt.refutedBy, tt.superseded)
	}
	if tt.refutedBy && fmt.Sprint(c.RefutedBy) != "[eps:msg_2]" {
		t.Fatalf("refuted by %v", c.RefutedBy)
	}
	if refused := len(c.RefutationsRefused) == 1 && c.RefutationsRefused[0].Message == "eps:msg_2" &&
		c.RefutationsRefused[0].Refused == string(protocol.ReasonClaimSuperseded); refused != tt.refuteRefused {
		t.Fatalf("refutations refused %+v", c.RefutationsRefused)
	}
}

// At home, the attest operation refuses a superseded claim before any event
// is made, on the claim as it stands; an attestation another realm made
// before the supersede, arriving after it, still counts, and one made after
// it, at a realm that had not received it, is shown refused.
func TestClaimHomeRefusesSuperseded(t *testing.T) {
	ctx := context.Background()
	s := newFixedService(t)
	alice, bob := agent(t, "alice"), agent(t, "bob")
	opened, err := s.post(ctx, alice, "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "Is it fast?",
		Claims: []protocol.ClaimInput{{Statement: "it is fast"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	refine, err := s.post(ctx, alice, "", &protocol.Envelope{Kind: protocol.ActRefine, Body: "Sharper.", Thread: protocol.KeyRef(opened.Thread.ID),
		RelatesTo: []string{"cl_1"}, Claims: []protocol.ClaimInput{{Statement: "it is fast when warm"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.attest(ctx, &api.Call{Principal: bob}, attestIn{ID: "cl_1", Verdict: "supports"})
	if ref, ok := err.(*protocol.Refusal); !ok || ref.Reason != protocol.ReasonClaimSuperseded {
		t.Fatalf("attesting a superseded claim: %v, want %s", err, protocol.ReasonClaimSuperseded)
	}

	// beta supported the claim a millisecond before the refine, and its word
	// comes late; one a millisecond after it does not count, though it is
	// shown, refused.
	beta := newChainWriter(t, s.st, "beta", 3, nil)
	beta.at = refine.Message.CreatedAt.UnixMilli() - 1
	early := beta.emit(evClaimAttested, "bob", attestData{Claim: "test:cl_1", Verdict: "supports"})
	beta.at = refine.Message.CreatedAt.UnixMilli() + 1
	beta.emit(evClaimAttested, "carol", attestData{Claim: "test:cl_1", Verdict: "supports"})
	res, err := s.getClaim(ctx, nil, claimIDIn{ID: "cl_1"})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Claim
	if c.State != protocol.ClaimSuperseded || len(c.Attestations) != 2 || c.Attestations[0].CID != early.String() || c.Attestations[0].Refused != "" ||
		c.Attestations[1].Refused != string(protocol.ReasonClaimSuperseded) || c.SupersededBy == nil || *c.SupersededBy != "cl_2" {
		t.Fatalf("claim %s, superseded by %v, attestations %+v", c.State, c.SupersededBy, c.Attestations)
	}
	if _, err = s.attest(ctx, &api.Call{Principal: bob}, attestIn{ID: "cl_1", Verdict: "supports"}); err == nil {
		t.Fatal("attesting the superseded claim again was not refused")
	}
}

// A claim record stored before facts were kept (no facts, no base) still
// reads as it was, and the facts that reach it later fold onto it.
func TestClaimLegacyRecord(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t)
	alpha := newChainWriter(t, s.st, "alpha", 2, nil)
	alpha.emit(evBoardCreated, "human", boardData{ID: 1, Slug: "general", Name: "General"})
	alpha.emit(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "Is it fast?", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "it is fast"}}})

	// Rewrite the claim as the old projector left it after a support and
	// a refute act: derived fields only.
	k := key(pfxClaim, rid{"alpha", 1}.bytes())
	var old claimRec
	created := time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC)
	legacy := func(tx *store.Tx) error {
		if _, err := tx.GetJSON(k, &old); err != nil {
			return err
		}
		old.State = protocol.ClaimRefuted
		old.Attestations = []attestation{{Verdict: "supports", By: "beta:bob", At: created.Add(time.Second), CID: "bafy-old-support"}}
		old.RefutedBy = []rid{{"alpha", 7}}
		old.UpdatedAt = created.Add(2 * time.Second)
		b, err := json.Marshal(&old)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(`"facts"`)) || bytes.Contains(b, []byte(`"base"`)) {
			t.Fatalf("a legacy record with facts: %s", b)
		}
		return tx.Set(k, b)
	}
	if _, err := s.st.Submit(ctx, func(tx *store.Tx) (*protocol.Draft, error) { return nil, legacy(tx) }); err != nil {
		t.Fatal(err)
	}
	res, err := s.getClaim(ctx, nil, claimIDIn{ID: "alpha:cl_1"})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Claim; c.State != protocol.ClaimRefuted || len(c.Attestations) != 1 || fmt.Sprint(c.RefutedBy) != "[alpha:msg_7]" {
		t.Fatalf("legacy claim reads %+v", c)
	}

	// An inconclusive word, then the seal: both fold onto what the record
	// had.
	alpha.at = created.Add(time.Hour).UnixMilli()
	alpha.emit(evClaimSealed, "human", sealData{Claim: "cl_1"})
	gamma := newChainWriter(t, s.st, "gamma", 4, nil)
	gamma.at = created.Add(time.Minute).UnixMilli()
	gamma.emit(evClaimAttested, "gus", attestData{Claim: "alpha:cl_1", Verdict: "inconclusive"})
	if res, err = s.getClaim(ctx, nil, claimIDIn{ID: "alpha:cl_1"}); err != nil {
		t.Fatal(err)
	}
	c := res.Claim
	if c.State != protocol.ClaimVerified || len(c.Attestations) != 2 || c.Attestations[0].CID != "bafy-old-support" ||
		c.Attestations[1].Verdict != "inconclusive" || fmt.Sprint(c.RefutedBy) != "[alpha:msg_7]" || c.SealedBy != "alpha:human" ||
		!c.UpdatedAt.Equal(created.Add(time.Hour)) {
		t.Fatalf("legacy claim after new facts: %+v", c)
	}
}

// Every realm's operator is human:<name>, often the same name: another
// realm's operator of that name is not the author of a claim. Its support
// lifts the claim, and its refine cannot supersede it.
func TestClaimAuthorIsOfItsRealm(t *testing.T) {
	s := newTestService(t)
	alpha := newChainWriter(t, s.st, "alpha", 2, nil)
	beta := newChainWriter(t, s.st, "beta", 3, nil)
	alpha.emit(evBoardCreated, "human:operator", boardData{ID: 1, Slug: "general", Name: "General"})
	alpha.emit(evThreadOpened, "human:operator", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "Is it fast?", AuthorKind: "user",
		Claims: []claimData{{N: 1, Statement: "it is fast"}}})
	beta.emit(evBoardCreated, "human:operator", boardData{ID: 1, Slug: "general", Name: "General"})
	beta.emit(evThreadOpened, "human:operator", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "About alpha's claim", AuthorKind: "user"})
	beta.emit(evMessagePosted, "human:operator", messageData{Thread: "th_1", N: 2, Kind: "refine", Body: "Sharper.", AuthorKind: "user",
		RelatesTo: []string{"alpha:cl_1"}, Claims: []claimData{{N: 1, Statement: "it is fast when warm"}}})
	beta.emit(evClaimAttested, "human:operator", attestData{Claim: "alpha:cl_1", Verdict: "supports"})

	res, err := s.getClaim(context.Background(), nil, claimIDIn{ID: "alpha:cl_1"})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Claim; c.State != protocol.ClaimSupported || c.SupersededBy != nil || len(c.Attestations) != 1 {
		t.Fatalf("claim %s, superseded by %v, %d attestations; want supported by beta's operator, not superseded", c.State, c.SupersededBy, len(c.Attestations))
	}
}

// A fact a reply brings (here a refute act) is the fact of the decision
// that joins the reply to its thread: it folds at the decision's place in
// the thread realm's chain whether the reply or the decision arrives
// first, also against a fact of that realm in the same millisecond.
func TestClaimFactOfDecisionAnyOrder(t *testing.T) {
	alpha := newChainWriter(t, nil, "alpha", 2, nil)
	beta := newChainWriter(t, nil, "beta", 3, nil)
	ev := []protocol.Evidence{{Kind: "log", Value: "failed"}}
	var raws [][]byte
	sign := func(c *chainWriter, typ, author string, d any) cid.Cid {
		raw, id := c.sign(typ, author, d)
		raws = append(raws, raw)
		return id
	}
	sign(alpha, evBoardCreated, "human:operator", boardData{ID: 1, Slug: "lobby", Name: "Lobby"})
	sign(alpha, evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "Fast?", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "it is fast"}}})
	alpha.at++
	reply := sign(beta, evMessagePosted, "dan", messageData{Thread: "alpha:th_1", N: 1, Kind: "refute", Body: "Not fast.", AuthorKind: "llm",
		Refutes: []string{"alpha:cl_1"}, Evidence: ev})
	sign(alpha, evClaimAttested, "bob", attestData{Claim: "cl_1", Verdict: "supports"})
	sign(alpha, evReplyAccepted, "dan", decisionData{Thread: "th_1", Message: "beta:msg_1", CID: reply.String()}) // the same millisecond
	board, opened, refute, attest, decide := raws[0], raws[1], raws[2], raws[3], raws[4]

	var want []byte
	for _, order := range [][][]byte{{board, opened, refute, attest, decide}, {board, opened, attest, decide, refute}} {
		s := ingestInOrder(t, order, 0, nil) // the decision waits for the reply
		var rec []byte
		err := s.st.View(func(tx *store.Tx) error {
			var err error
			rec, err = tx.Get(key(pfxClaim, rid{"alpha", 1}.bytes()))
			return err
		})
		s.st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			want = rec
		} else if !bytes.Equal(rec, want) {
			t.Fatalf("the decision first stores\n%s\nthe reply first\n%s", rec, want)
		}
	}
}

// TestReplyRefutingUnheldClaimParks: beta's reply into alpha's thread
// refutes gamma's claim, which this node does not hold yet. Whichever of the
// reply and alpha's acceptance comes last is parked rather than refused,
// and once gamma's claim arrives the claim ends as when it came first.
func TestReplyRefutingUnheldClaimParks(t *testing.T) {
	alpha := newChainWriter(t, nil, "alpha", 2, nil)
	beta := newChainWriter(t, nil, "beta", 3, nil)
	gamma := newChainWriter(t, nil, "gamma", 4, nil)
	ev := []protocol.Evidence{{Kind: "log", Value: "failed"}}
	board, _ := alpha.sign(evBoardCreated, "human:operator", boardData{ID: 1, Slug: "lobby", Name: "Lobby"})
	opened, _ := alpha.sign(evThreadOpened, "alice", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "ask", Body: "Fast?", AuthorKind: "llm"})
	claim, _ := gamma.sign(evBoardCreated, "human:operator", boardData{ID: 1, Slug: "lobby", Name: "Lobby"})
	claimed, _ := gamma.sign(evThreadOpened, "carol", messageData{Thread: "th_1", Board: 1, N: 1, Kind: "propose", Body: "It is fast.", AuthorKind: "llm",
		Claims: []claimData{{N: 1, Statement: "it is fast"}}})
	reply, replyID := beta.sign(evMessagePosted, "dan", messageData{Thread: "alpha:th_1", N: 1, Kind: "refute", Body: "Not fast.", AuthorKind: "llm",
		Refutes: []string{"gamma:cl_1"}, Evidence: ev})
	decide, _ := alpha.sign(evReplyAccepted, "dan", decisionData{Thread: "th_1", Message: "beta:msg_1", CID: replyID.String()})

	ctx := context.Background()
	var want []byte
	for i, order := range [][][]byte{
		{claim, claimed, board, opened, reply, decide},
		{board, opened, reply, decide, claim, claimed},
		{board, opened, decide, reply, claim, claimed},
	} {
		s := newTestService(t)
		if _, err := s.st.EnsureProjections(ctx); err != nil {
			t.Fatal(err)
		}
		for j, raw := range order {
			if _, err := s.st.Ingest(ctx, raw, func(*protocol.Event) error { return nil }); err != nil {
				t.Fatalf("order %d, event %d: %v", i, j, err)
			}
			if i > 0 && j == 3 {
				if p, err := s.st.ParkedEvents(0); err != nil || len(p) != 1 {
					t.Fatalf("order %d: parked %+v %v", i, p, err)
				}
			}
		}
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if p, err := s.st.ParkedEvents(0); err == nil && len(p) == 0 {
				break
			} else if time.Now().After(end) {
				t.Fatalf("order %d: still parked %+v %v", i, p, err)
			}
		}
		var rec []byte
		err := s.st.View(func(tx *store.Tx) error {
			var err error
			rec, err = tx.Get(key(pfxClaim, rid{"gamma", 1}.bytes()))
			return err
		})
		s.st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(rec, []byte(replyID.String())) && !bytes.Contains(rec, []byte("beta")) {
			t.Fatalf("order %d: the claim does not hold the refutation:\n%s", i, rec)
		}
		if want == nil {
			want = rec
		} else if !bytes.Equal(rec, want) {
			t.Fatalf("order %d stores\n%s\nthe claim first\n%s", i, rec, want)
		}
	}
}
