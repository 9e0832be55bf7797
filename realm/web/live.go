package web

import (
	"fmt"
	"net/http"
	"time"
)

const (
	// liveHeartbeat keeps proxies from closing a quiet stream.
	liveHeartbeat = 15 * time.Second
	// livePoll catches events that came by no operation (from a peer).
	livePoll = time.Second
	// liveBatch coalesces a burst of writes into one change.
	liveBatch = 250 * time.Millisecond
)

// live is the console's Server-Sent Events stream: an event "change" after
// every write through the registry, whatever its transport, and whenever the
// store's sequence moves; an event "ended", and the end of the stream, once
// the session is no longer live. It carries no data a page shows: a page that
// hears it fetches itself again, through the same rights check as ever.
func (c *Console) live(w http.ResponseWriter, r *http.Request, s *visit) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(format string, args ...any) bool {
		rc.SetWriteDeadline(time.Now().Add(time.Minute))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	seq := c.cfg.Store.Sequence()
	if !write("retry: 3000\n: live %d\n\n", seq) {
		return
	}
	poll := time.NewTicker(livePoll)
	defer poll.Stop()
	last := time.Now()
	for {
		changed := c.cfg.Registry.Changed()
		moved := false
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case <-changed:
			moved = true
		case <-poll.C:
			if !c.cfg.Sessions.Live(s.cookie) {
				// Logged out, ended elsewhere or expired: the page says
				// so, rather than staying "live" with nothing coming.
				write("event: ended\ndata: session\n\n")
				return
			}
			moved = c.cfg.Store.Sequence() != seq
		}
		if moved {
			// Let a burst settle, so one fetch covers it.
			select {
			case <-time.After(liveBatch):
			case <-r.Context().Done():
				return
			case <-c.done:
				return
			}
			seq = c.cfg.Store.Sequence()
			if !write("event: change\ndata: %d\n\n", seq) {
				return
			}
			last = time.Now()
			continue
		}
		if time.Since(last) >= liveHeartbeat {
			if !write(": keep-alive\n\n") {
				return
			}
			last = time.Now()
		}
	}
}
