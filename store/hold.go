package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrAuthoringHeld is returned by Submit for an op that would append an
// event of this realm while authoring stayed held (HoldAuthoring) for
// longer than AuthorHoldWait.
var ErrAuthoringHeld = errors.New("store: this realm's events are held while its chain is brought level with what peers hold")

// AuthorHoldWait is how long Submit waits for a hold on authoring to end.
var AuthorHoldWait = 10 * time.Second

// errHeld fails an op that would author while authoring is held; Submit
// waits for the release and runs it again.
var errHeld = errors.New("store: authoring held")

// authorHold is HoldAuthoring's state: how many hold it, and the channel
// closed when the last lets go (nil while nobody holds it).
type authorHold struct {
	mu   sync.Mutex
	n    int
	open chan struct{}
	held atomic.Bool // n > 0, read without mu on the committer's path
}

// HoldAuthoring stops this realm's events from being appended until every
// holder has called the release it got: an op of Submit that would author
// one waits for the release (at most AuthorHoldWait, then ErrAuthoringHeld)
// and runs again. Ops that author nothing, Ingest and Restore go on. The
// federation holds it while it takes this realm's own events from a peer
// that holds its chain beyond this node's log (the node runs on an older
// copy of its store): an event authored meanwhile would fork the chain.
func (s *Store) HoldAuthoring() (release func()) {
	h := &s.hold
	h.mu.Lock()
	if h.n == 0 {
		h.open = make(chan struct{})
		h.held.Store(true)
	}
	h.n++
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.n--; h.n == 0 {
				h.held.Store(false)
				close(h.open)
				h.open = nil
			}
		})
	}
}

// authoringHeld returns the channel closed when the hold on authoring ends,
// or nil when it is not held.
func (s *Store) authoringHeld() <-chan struct{} {
	if !s.hold.held.Load() {
		return nil
	}
	s.hold.mu.Lock()
	defer s.hold.mu.Unlock()
	return s.hold.open
}

// awaitAuthoring waits, for Submit, until authoring is no longer held, the
// deadline passes (ErrAuthoringHeld) or ctx ends.
func (s *Store) awaitAuthoring(ctx context.Context, deadline time.Time) error {
	ch := s.authoringHeld()
	if ch == nil {
		return nil
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return ErrAuthoringHeld
	case <-ctx.Done():
		return ctx.Err()
	}
}
