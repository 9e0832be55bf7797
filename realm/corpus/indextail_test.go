package corpus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"relay/protocol"
	"relay/store"
)

func tailEvents(types string, from uint64) []*store.StoredEvent {
	var out []*store.StoredEvent
	for i, c := range types {
		typ := "parley.note"
		if c == 'm' {
			typ = evMessageCreated
		}
		out = append(out, &store.StoredEvent{Event: &protocol.Event{Type: typ}, Sequence: from + uint64(i), Raw: make([]byte, 10)})
	}
	return out
}

func seqsOfEvents(evs []*store.StoredEvent) []uint64 {
	var out []uint64
	for _, se := range evs {
		out = append(out, se.Sequence)
	}
	return out
}

// TestIndexTail: the tail vouches only for what it saw from the index's
// mark on, hands each message out once, and starts afresh past its bounds.
func TestIndexTail(t *testing.T) {
	var tail indexTail
	if _, _, ok := tail.take(0, 10); ok {
		t.Fatal("an empty tail vouched for events")
	}
	tail.push(tailEvents("mpm", 5)) // 5 m, 6 p, 7 m
	if _, _, ok := tail.take(3, 7); ok {
		t.Fatal("the tail vouched for sequence 4, which it never saw")
	}
	evs, mark, ok := tail.take(4, 6)
	if !ok || mark != 6 || fmt.Sprint(seqsOfEvents(evs)) != "[5]" {
		t.Fatalf("take(4, 6): %v %d %v", seqsOfEvents(evs), mark, ok)
	}
	tail.push(tailEvents("pm", 8)) // 8 p, 9 m
	// The store acked 10 before it reported it: the tail vouches up to 9.
	evs, mark, ok = tail.take(6, 10)
	if !ok || mark != 9 || fmt.Sprint(seqsOfEvents(evs)) != "[7 9]" {
		t.Fatalf("take(6, 10): %v %d %v", seqsOfEvents(evs), mark, ok)
	}
	if _, _, ok := tail.take(9, 10); ok {
		t.Fatal("the tail vouched for sequence 10 before it was reported")
	}
	tail.push(tailEvents("m", 10))
	// The index read 10 and 11 from the log meanwhile: what the tail holds
	// below the mark is dropped.
	tail.push(tailEvents("mm", 11))
	evs, mark, ok = tail.take(11, 20)
	if !ok || mark != 12 || fmt.Sprint(seqsOfEvents(evs)) != "[12]" || len(tail.evs) != 0 || tail.bytes != 0 {
		t.Fatalf("take(11, 20): %v %d %v, left %d events %d bytes", seqsOfEvents(evs), mark, ok, len(tail.evs), tail.bytes)
	}
	// Past its bound it drops everything, and vouches again from the next
	// batch on.
	big := make([]byte, 0, maxTailEvents+1)
	for range maxTailEvents + 1 {
		big = append(big, 'm')
	}
	tail.push(tailEvents(string(big), 13))
	if _, _, ok := tail.take(12, 1<<40); ok || len(tail.evs) != 0 {
		t.Fatal("the tail kept events past its bound")
	}
	next := uint64(13 + maxTailEvents + 1)
	tail.push(tailEvents("m", next))
	if _, _, ok := tail.take(12, next); ok {
		t.Fatal("the tail vouched for events it dropped")
	}
	if evs, _, ok := tail.take(next-1, next); !ok || len(evs) != 1 {
		t.Fatalf("after the drop: %v %v", seqsOfEvents(evs), ok)
	}
}

// TestIndexFollowsCommits: the index catches up with commits by itself,
// with no search to sync it, and exactly once per message.
func TestIndexFollowsCommits(t *testing.T) {
	f := openSearchFixture(t, "")
	p := f.agent()
	conv := f.post(p, writeIn{Content: text("first")}).ConversationID
	for i := range 50 {
		f.post(p, writeIn{ConversationID: conv, Content: text(fmt.Sprint("follow ", i))})
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.s.indexBehind() {
		if time.Now().After(deadline) {
			t.Fatal("the index did not catch up with the commits")
		}
		time.Sleep(time.Millisecond)
	}
	f.s.index.mu.RLock()
	n := len(f.s.index.docs)
	f.s.index.mu.RUnlock()
	if n != 51 {
		t.Fatalf("index holds %d messages, want 51", n)
	}
	if out := f.search(searchIn{Q: "follow", Limit: ptr(1000)}); out.Total != 50 {
		t.Fatalf("follow: %d", out.Total)
	}
	// A service opened on a store that holds messages reads them from the
	// log, then follows the tail.
	s2, err := New(f.st, Config{Realm: "ainotes", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	f.post(p, writeIn{ConversationID: conv, Content: text("follow late")})
	if out, err := s2.search(context.Background(), nil, searchIn{Q: "follow", Limit: ptr(1000)}); err != nil || out.Total != 51 {
		t.Fatalf("second service: %v %d", err, out.Total)
	}
}
