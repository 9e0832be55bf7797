package corpus

import (
	"errors"
	"slices"
	"sync"

	"relay/store"
)

// Bounds of the index tail: past either, it drops what it holds and the
// index reads those events back from the log instead.
const (
	maxTailEvents = 16384
	maxTailBytes  = 16 << 20 // of raw events
)

// indexTail is what the store reported committed (Store.Watch) that the
// index has not taken yet: the corpus.message.created events among every
// committed event with a sequence in [first, last], in log order, already
// decoded. syncIndex takes them rather than reading the events back from
// Badger and decoding them again, when the tail covers every event after
// the index's mark; otherwise (before the first report, after the tail
// dropped what it held, or when the store acked a write before it
// reported the batch) it reads them from the log as before.
type indexTail struct {
	mu          sync.Mutex
	first, last uint64 // first is 0 while the tail covers nothing
	evs         []*store.StoredEvent
	bytes       int
}

// push adds a committed batch's events, in log order. It runs on the
// store's writer goroutine: it only appends.
func (t *indexTail) push(evs []*store.StoredEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, se := range evs {
		if t.first == 0 {
			t.first = se.Sequence
		}
		t.last = se.Sequence
		if se.Event.Type == evMessageCreated {
			t.evs = append(t.evs, se)
			t.bytes += len(se.Raw)
		}
	}
	if len(t.evs) > maxTailEvents || t.bytes > maxTailBytes {
		t.evs, t.bytes, t.first = nil, 0, 0
	}
}

// take returns the message events with a sequence in (after, mark] and
// mark, the highest sequence up to upTo that the tail vouches for, and
// forgets them; ok is false when the tail does not hold every event right
// after after. mark > after when ok.
func (t *indexTail) take(after, upTo uint64) (evs []*store.StoredEvent, mark uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first == 0 || t.first > after+1 || t.last <= after {
		return nil, 0, false
	}
	mark = min(t.last, upTo)
	i := 0
	for i < len(t.evs) && t.evs[i].Sequence <= after {
		i++ // indexed already, from the log
	}
	j := i
	for j < len(t.evs) && t.evs[j].Sequence <= mark {
		j++
	}
	evs = slices.Clone(t.evs[i:j])
	for _, se := range t.evs[:j] {
		t.bytes -= len(se.Raw)
	}
	t.evs = slices.Delete(t.evs, 0, j)
	return evs, mark, true
}

// committed is the corpus's Store.Watch: the tail takes the batch, and the
// index follows in the background, so that neither the writers nor the
// next search pay for it.
func (s *Service) committed(evs []*store.StoredEvent) {
	s.tail.push(evs)
	s.indexAhead()
}

// indexAhead syncs the index on a goroutine of its own unless one is at it
// already; that one looks again before it stops.
func (s *Service) indexAhead() {
	if !s.indexing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			err := s.syncIndex()
			s.indexing.Store(false)
			if err != nil {
				// The next commit or search tries again.
				if !errors.Is(err, store.ErrClosed) {
					s.log.Warn("corpus search: index sync after a commit", "err", err)
				}
				return
			}
			// A batch reported after syncIndex last looked found the flag
			// set and left it to this goroutine.
			if !s.indexBehind() || !s.indexing.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// indexBehind reports whether committed messages may be missing from the
// index.
func (s *Service) indexBehind() bool {
	s.index.mu.RLock()
	defer s.index.mu.RUnlock()
	return s.index.upTo < s.st.Sequence()
}
