package federation

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"relay/protocol"
	"relay/store"
)

func TestRunFraming(t *testing.T) {
	raws := [][]byte{[]byte("a"), bytes.Repeat([]byte("b"), 300), []byte("c")}
	got, err := splitRun(encodeRun(raws))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(raws) {
		t.Fatalf("split %d events, want %d", len(got), len(raws))
	}
	for i := range raws {
		if !bytes.Equal(got[i], raws[i]) {
			t.Fatalf("event %d: %q, want %q", i, got[i], raws[i])
		}
	}
}

var badRunTests = []struct {
	name string
	data []byte
}{
	{"empty", nil},
	{"truncated length", []byte{0x80}},
	{"empty event", []byte{0}},
	{"length in more bytes than it takes", []byte{0x86, 0x00, '0', '0', '0', '0', '0', '0'}},
	{"short event", append(binary.AppendUvarint(nil, 5), "abc"...)},
	{"trailing byte", append(encodeRun([][]byte{[]byte("abc")}), 7)},
	{"event too large", binary.AppendUvarint(nil, protocol.MaxEventSize+1)},
	{"too many events", bytes.Repeat([]byte{1, 'x'}, maxGossipEvents+1)},
	{"message too large", append(binary.AppendUvarint(nil, protocol.MaxEventSize), make([]byte, protocol.MaxEventSize+binary.MaxVarintLen32)...)},
}

func TestSplitRunRefuses(t *testing.T) {
	for _, tc := range badRunTests {
		if _, err := splitRun(tc.data); !errors.Is(err, errBadMessage) {
			t.Errorf("%s: err %v, want errBadMessage", tc.name, err)
		}
	}
}

func FuzzSplitRun(f *testing.F) {
	f.Add(encodeRun([][]byte{[]byte("a"), []byte("bc")}))
	for _, tc := range badRunTests {
		if len(tc.data) < 1024 {
			f.Add(tc.data)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		raws, err := splitRun(b)
		if err != nil {
			return
		}
		if again := encodeRun(raws); !bytes.Equal(again, b) {
			t.Fatalf("split and joined again differs: %x, was %x", again, b)
		}
	})
}

// TestRuns checks that the publisher cuts a run where seq jumps (events
// the outbox dropped) and at the limits of a message.
func TestRuns(t *testing.T) {
	ev := func(seq uint64, size int) *store.StoredEvent {
		return &store.StoredEvent{Event: &protocol.Event{Seq: seq}, Raw: make([]byte, size)}
	}
	var evs []*store.StoredEvent
	for seq := uint64(1); seq <= 3; seq++ {
		evs = append(evs, ev(seq, 10))
	}
	evs = append(evs, ev(7, 10), ev(8, maxGossipBytes), ev(9, 10))
	for seq := uint64(10); seq < 10+maxGossipEvents+1; seq++ {
		evs = append(evs, ev(seq, 1))
	}
	var sizes []int
	for _, r := range runs(evs) {
		sizes = append(sizes, len(r))
	}
	want := []int{3, 1, 1, maxGossipEvents, 2}
	if !slices.Equal(sizes, want) {
		t.Fatalf("runs of %v events, want %v", sizes, want)
	}
}
