package realm

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// drainGrace bounds how long a shutdown waits for keep-alive connections
// to carry one more request before it closes them; a connection idle for
// drainQuiet already is closed at once, its client not in the middle of a
// run of requests.
var (
	drainGrace = time.Second
	drainQuiet = 50 * time.Millisecond
)

// drainer ends a server's connections between requests rather than under
// them. http.Server.Shutdown closes every idle connection at once; a
// client that has just written its next request on one then reads a reset
// or an EOF, and cannot know whether its write happened (a POST without an
// Operation-Token cannot be retried safely). Draining, the listener is
// closed first, so a new connection is refused before anything is sent;
// every answer says Connection: close, so a connection's next request is
// answered and the connection then closed by the server; and Shutdown
// comes once every connection left idle has been so for drainQuiet, or
// after drainGrace.
type drainer struct {
	draining atomic.Bool
	mu       sync.Mutex
	conns    map[net.Conn]*connDrain
}

type connDrain struct {
	idle  bool      // between requests
	since time.Time // when it last became idle
}

func newDrainer() *drainer { return &drainer{conns: map[net.Conn]*connDrain{}} }

// connState is the server's ConnState hook.
func (d *drainer) connState(c net.Conn, s http.ConnState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch s {
	case http.StateNew:
		d.conns[c] = &connDrain{idle: true, since: time.Now()}
	case http.StateActive:
		if cd := d.conns[c]; cd != nil {
			cd.idle = false
		}
	case http.StateIdle:
		if cd := d.conns[c]; cd != nil {
			*cd = connDrain{idle: true, since: time.Now()}
		}
	case http.StateHijacked, http.StateClosed:
		delete(d.conns, c)
	}
}

// handler closes each connection after its answer once draining.
func (d *drainer) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// drain closes ln and waits, up to grace, until no connection has been
// idle for less than drainQuiet.
func (d *drainer) drain(ln net.Listener, grace time.Duration) {
	d.draining.Store(true)
	ln.Close()
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && d.recentlyIdle() {
		time.Sleep(5 * time.Millisecond)
	}
}

// recentlyIdle reports whether a connection has been idle for less than
// drainQuiet: its client may be about to send its next request.
func (d *drainer) recentlyIdle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cd := range d.conns {
		if cd.idle && time.Since(cd.since) < drainQuiet {
			return true
		}
	}
	return false
}

// onceCloseListener is closed by the drain and again by Shutdown, which
// would report the second close as its error.
type onceCloseListener struct {
	net.Listener
	once sync.Once
	err  error
}

func (l *onceCloseListener) Close() error {
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}
