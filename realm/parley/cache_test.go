package parley

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// failingProjector refuses the events whose message body is its trigger,
// after the forum's projector has written (and cached) its records.
type failingProjector struct{ trigger string }

var errRefused = errors.New("test: refused by the failing projector")

func (failingProjector) Prefixes() [][]byte { return [][]byte{[]byte("p/test/")} }

func (f failingProjector) Apply(tx *store.Tx, se *store.StoredEvent) error {
	if se.Event.Type != evMessagePosted {
		return nil
	}
	var d messageData
	if err := protocol.DecodeData(se.Event.Data, &d); err != nil {
		return err
	}
	if d.Body == f.trigger {
		return errRefused
	}
	return nil
}

func openThread(t *testing.T, s *Service, p string) ThreadOut {
	t.Helper()
	out, err := s.post(context.Background(), agent(t, p), "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "Is the cache right?"}, "")
	if err != nil {
		t.Fatal(err)
	}
	return out.Thread
}

func note(s *Service, p *api.Principal, thread, body string) (PostOut, error) {
	return s.post(context.Background(), p, "", &protocol.Envelope{Kind: protocol.ActNote, Body: body, Thread: protocol.KeyRef(thread)}, "")
}

func readThread(t *testing.T, s *Service, id string) ThreadTreeOut {
	t.Helper()
	out, err := s.getThread(context.Background(), nil, threadIDIn{ID: protocol.KeyRef(id)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readBoard(t *testing.T, s *Service) Board {
	t.Helper()
	var b Board
	err := s.st.View(func(tx *store.Tx) error {
		_, err := tx.GetJSON(key(pfxBoard, rid{testRealm, 1}.bytes()), &b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A post whose op fails after the projector cached the thread and board it
// wrote leaves neither behind: the next post and every read see the
// records as committed.
func TestFailedPostLeavesNoStaleRecord(t *testing.T) {
	s := newTestService(t)
	s.st.Register(failingProjector{trigger: "fail"})
	th := openThread(t, s, "alice")
	if _, err := note(s, agent(t, "alice"), th.ID, "one"); err != nil {
		t.Fatal(err)
	}
	before := readBoard(t, s)
	if _, err := note(s, agent(t, "alice"), th.ID, "fail"); !errors.Is(err, errRefused) {
		t.Fatalf("post: %v, want the projector's refusal", err)
	}
	if got := readThread(t, s, th.ID).Thread.MessageCount; got != 2 {
		t.Fatalf("after the failed post the thread shows %d messages, want 2", got)
	}
	if got := readBoard(t, s); got.Messages != before.Messages {
		t.Fatalf("after the failed post the board shows %d messages, want %d", got.Messages, before.Messages)
	}
	out, err := note(s, agent(t, "alice"), th.ID, "three")
	if err != nil {
		t.Fatal(err)
	}
	if out.Thread.MessageCount != 3 || out.Message.ID != "msg_3" {
		t.Fatalf("the post after the failed one answers %s with %d messages, want msg_3 with 3", out.Message.ID, out.Thread.MessageCount)
	}
	if got := readBoard(t, s); got.Messages != before.Messages+1 {
		t.Fatalf("the board shows %d messages, want %d", got.Messages, before.Messages+1)
	}
	if n := len(s.recs.ops); n != 0 {
		t.Fatalf("%d ops' changes still held after their ops ended", n)
	}
}

// An op that writes a thread through the cache and then fails does not
// change what later ops and reads see.
func TestFailedOpWriteIsNotRead(t *testing.T) {
	s := newTestService(t)
	th := openThread(t, s, "alice")
	k := key(pfxThread, rid{testRealm, 1}.bytes())
	errFail := errors.New("test: the op fails")
	_, err := s.st.Submit(context.Background(), func(tx *store.Tx) (*protocol.Draft, error) {
		var t threadRec
		if _, err := s.recs.threads.Get(tx, k, &t); err != nil {
			return nil, err
		}
		t.Messages, t.Title = 99, "never committed"
		if err := s.recs.threads.set(tx, k, &t); err != nil {
			return nil, err
		}
		var again threadRec // the op sees its own write
		if _, err := s.recs.threads.Get(tx, k, &again); err != nil || again.Messages != 99 {
			return nil, fmt.Errorf("the op reads %d messages (%v), want its own 99", again.Messages, err)
		}
		return nil, errFail
	})
	if !errors.Is(err, errFail) {
		t.Fatal(err)
	}
	got := readThread(t, s, th.ID).Thread
	if got.MessageCount != 1 || got.Title != th.Title {
		t.Fatalf("read %d messages, title %q; want 1, %q", got.MessageCount, got.Title, th.Title)
	}
	out, err := note(s, agent(t, "bob"), th.ID, "after")
	if err != nil {
		t.Fatal(err)
	}
	if out.Thread.MessageCount != 2 || out.Thread.Title != th.Title {
		t.Fatalf("the next post answers %d messages, title %q; want 2, %q", out.Thread.MessageCount, out.Thread.Title, th.Title)
	}
}

// Concurrent posts into one thread, and into many, lose no update, and
// each answer is its own message with the thread right after it.
func TestConcurrentPostsCount(t *testing.T) {
	s := newTestService(t)
	const agents, posts = 8, 25
	shared := openThread(t, s, "host")
	var wg sync.WaitGroup
	errs := make(chan error, agents)
	own := make([]ThreadOut, agents)
	for i := range agents {
		own[i] = openThread(t, s, fmt.Sprintf("a%d", i))
	}
	for i := range agents {
		wg.Add(1)
		p := agent(t, fmt.Sprintf("a%d", i))
		go func() {
			defer wg.Done()
			for j := range posts {
				for _, th := range []string{shared.ID, own[i].ID} {
					out, err := note(s, p, th, fmt.Sprintf("post %d", j))
					if err != nil {
						errs <- err
						return
					}
					if out.Thread.LastMessage == nil || out.Thread.LastMessage.ID != out.Message.ID {
						errs <- fmt.Errorf("the answer's thread ends with %+v, not its message %s", out.Thread.LastMessage, out.Message.ID)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := readThread(t, s, shared.ID).Thread.MessageCount; got != 1+agents*posts {
		t.Fatalf("shared thread: %d messages, want %d", got, 1+agents*posts)
	}
	for i := range agents {
		if got := readThread(t, s, own[i].ID).Thread.MessageCount; got != 1+posts {
			t.Fatalf("thread of a%d: %d messages, want %d", i, got, 1+posts)
		}
	}
	if b := readBoard(t, s); b.Threads != 1+agents || b.Messages != 1+agents+2*agents*posts {
		t.Fatalf("board: %d threads, %d messages; want %d, %d", b.Threads, b.Messages, 1+agents, 1+agents+2*agents*posts)
	}
}

// A post's answer, built from what its op wrote, is what reading the
// message and thread back gives, for every part of an envelope.
func TestPostAnswerIsReadBack(t *testing.T) {
	s := newTestService(t)
	ctx := context.Background()
	alice, bob := agent(t, "alice"), agent(t, "bob")
	open, err := s.post(ctx, alice, "lobby", &protocol.Envelope{Kind: protocol.ActAsk, Body: "Which <b>number</b> & why?",
		Claims: []protocol.ClaimInput{{Statement: "it is 42", Evidence: []protocol.Evidence{{Kind: "note", Value: "by hand"}}}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	th := protocol.KeyRef(open.Thread.ID)
	envs := []protocol.Envelope{
		{Kind: protocol.ActAnswer, Body: "42 \u2028 ✓", Thread: th, Parent: protocol.KeyRef(open.Message.ID),
			From:       &protocol.From{Extension: "worker-2"},
			Provenance: map[string]any{"model": "m", "n": json.Number("12345678901234567"), "f": json.Number("0.1"), "big": json.Number(fmt.Sprint(uint64(math.MaxUint64))), "nested": map[string]any{"x": []any{json.Number("1"), "y"}}},
			RelatesTo:  []string{open.Message.ID, open.Thread.ID}},
		{Kind: protocol.ActRefute, Body: "no", Thread: th, Refutes: []string{"cl_1"}, Evidence: []protocol.Evidence{{Kind: "url", Value: "https://example.org/x"}}},
		{Kind: protocol.ActRefine, Body: "it is 43", Thread: th, RelatesTo: []string{"cl_1"},
			Claims: []protocol.ClaimInput{{Statement: "it is 43"}}},
		{Kind: protocol.ActDecide, Body: "43 it is", Thread: th},
	}
	for i, env := range envs {
		p := bob
		if i >= 2 {
			p = alice
		}
		out, err := s.post(ctx, p, "", &env, "")
		if err != nil {
			t.Fatalf("envelope %d: %v", i, err)
		}
		mid, err := protocol.ParseKey(protocol.KeyMessage, out.Message.ID)
		if err != nil {
			t.Fatal(err)
		}
		back, err := s.postOut(rid{testRealm, mid.N}, rid{testRealm, 1})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(out)
		want, _ := json.Marshal(back)
		if string(got) != string(want) {
			t.Fatalf("envelope %d answers\n%s\nread back\n%s", i, got, want)
		}
	}
}

// The cache stays right when it holds fewer records than are hot.
func TestRecordCacheEvicts(t *testing.T) {
	s := newTestService(t)
	s.recs.threads.Max, s.recs.boards.Max = 2, 1
	var ids []string
	for i := range 5 {
		ids = append(ids, openThread(t, s, fmt.Sprintf("a%d", i)).ID)
	}
	for round := range 3 {
		for i, id := range ids {
			out, err := note(s, agent(t, fmt.Sprintf("a%d", i)), id, "again")
			if err != nil {
				t.Fatal(err)
			}
			if out.Thread.MessageCount != round+2 {
				t.Fatalf("%s: %d messages, want %d", id, out.Thread.MessageCount, round+2)
			}
		}
	}
	if n := s.recs.threads.Len(); n > 2 {
		t.Fatalf("the thread cache holds %d records, more than its 2", n)
	}
}

// A reply's parent is checked from its cached head as from its record:
// found by key, number or CID, in its thread only, and never the replier's
// own line and extension.
func TestParentChecks(t *testing.T) {
	s := newTestService(t)
	ctx := context.Background()
	alice, bob := agent(t, "alice"), agent(t, "bob")
	a := openThread(t, s, "alice")
	other := openThread(t, s, "bob")
	ask, err := s.post(ctx, alice, "", &protocol.Envelope{Kind: protocol.ActAsk, Body: "and?", Thread: protocol.KeyRef(a.ID),
		From: &protocol.From{Extension: "w1"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	reply := func(p *api.Principal, ext string, parent string) error {
		env := &protocol.Envelope{Kind: protocol.ActAnswer, Body: "this", Thread: protocol.KeyRef(a.ID), Parent: protocol.KeyRef(parent)}
		if ext != "" {
			env.From = &protocol.From{Extension: ext}
		}
		_, err := s.post(ctx, p, "", env, "")
		return err
	}
	reason := func(err error) protocol.Reason {
		var ref *protocol.Refusal
		if errors.As(err, &ref) {
			return ref.Reason
		}
		return ""
	}
	n := ask.Message.ID[len("msg_"):]
	for _, parent := range []string{ask.Message.ID, n, string(testRealm) + ":" + ask.Message.ID, ask.Message.CID} {
		if err := reply(alice, "w1", parent); reason(err) != protocol.ReasonSelfReply {
			t.Fatalf("alice/w1 answering her own %s: %v, want self_reply", parent, err)
		}
		if err := reply(alice, "w2", parent); err != nil {
			t.Fatalf("alice/w2 answering %s: %v", parent, err)
		}
		if err := reply(bob, "w1", parent); err != nil {
			t.Fatalf("bob/w1 answering %s: %v", parent, err)
		}
	}
	otherMsg := "msg_" + fmt.Sprint(2) // the opening of the second thread
	if other.LastMessage == nil || other.LastMessage.ID != otherMsg {
		t.Fatalf("the second thread opens with %+v, want %s", other.LastMessage, otherMsg)
	}
	for _, parent := range []string{otherMsg, "msg_999", "cl_1", "nonsense"} {
		if err := reply(bob, "", parent); reason(err) != protocol.ReasonParentNotFound {
			t.Fatalf("answering %s: %v, want parent_not_found", parent, err)
		}
	}
}

// The extensions a line used are remembered newest first, and a failed
// post does not leave its extension behind.
func TestExtensionsRemembered(t *testing.T) {
	s := newTestService(t)
	s.st.Register(failingProjector{trigger: "fail"})
	alice := agent(t, "alice")
	th := openThread(t, s, "alice")
	post := func(ext, body string) error {
		_, err := s.post(context.Background(), alice, "", &protocol.Envelope{Kind: protocol.ActNote, Body: body,
			Thread: protocol.KeyRef(th.ID), From: &protocol.From{Extension: ext}}, "")
		return err
	}
	for _, ext := range []string{"a", "b", "a", "c", "c"} {
		if err := post(ext, "note"); err != nil {
			t.Fatal(err)
		}
	}
	if err := post("d", "fail"); !errors.Is(err, errRefused) {
		t.Fatalf("post: %v, want the projector's refusal", err)
	}
	if err := post("b", "note"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Extensions(alice.Identity.String())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"b", "c", "a"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("extensions %v, want %v", got, want)
	}
}
