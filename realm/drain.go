package realm

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// drainGrace bounds how long a shutdown waits for keep-alive connections
// to carry one more request before it closes them; a connection idle for
// drainQuiet already is closed at once, its client not in the middle of a
// run of requests. bodyGrace is how long it waits for the rest of a
// request body still coming.
var (
	drainGrace = time.Second
	drainQuiet = 50 * time.Millisecond
	bodyGrace  = 5 * time.Second
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
//
// Shutdown also waits for requests whose body is still coming, for as long
// as the client takes. Draining gives such a body bodyGrace, by a read
// deadline on its connection, so that a stalled client holds the shutdown
// for seconds; cut off, its request was not answered, and its client knows
// that it never finished sending it.
type drainer struct {
	draining atomic.Bool
	mu       sync.Mutex
	conns    map[net.Conn]*connDrain
}

type connDrain struct {
	idle  bool      // between requests
	since time.Time // when it last became idle
	body  bool      // a request body is still coming (or being discarded)
	cut   bool      // the drain set a read deadline for it
}

func newDrainer() *drainer { return &drainer{conns: map[net.Conn]*connDrain{}} }

type connKey struct{}

// connContext is the server's ConnContext hook: a request knows its
// connection, to cut off its body.
func (d *drainer) connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

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
			*cd = connDrain{idle: true, since: time.Now()} // the server set its idle deadline
		}
	case http.StateHijacked, http.StateClosed:
		delete(d.conns, c)
	}
}

// handler closes each connection after its answer once draining, and
// keeps track of the request bodies still coming.
func (d *drainer) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		if c, ok := r.Context().Value(connKey{}).(net.Conn); ok && r.Body != nil && r.Body != http.NoBody {
			d.mu.Lock()
			if cd := d.conns[c]; cd != nil {
				cd.body = true
				if d.draining.Load() {
					cut(c, cd)
				}
			}
			d.mu.Unlock()
			r.Body = &drainBody{ReadCloser: r.Body, d: d, c: c}
		}
		h.ServeHTTP(w, r)
	})
}

// drainBody is a request body that says when it has been read to its end.
// Cut off, it keeps its deadline: the server would otherwise wait for the
// rest, to discard it, after the handler's answer.
type drainBody struct {
	io.ReadCloser
	d *drainer
	c net.Conn
}

func (b *drainBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.d.bodyRead(b.c)
	}
	return n, err
}

// bodyRead lifts the deadline a drain set for a body: the server reads on
// after the body to see the client go, and a deadline there would cancel
// the request's context under its handler.
func (d *drainer) bodyRead(c net.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cd := d.conns[c]
	if cd == nil || !cd.body {
		return
	}
	cd.body = false
	if cd.cut {
		cd.cut = false
		c.SetReadDeadline(time.Time{})
	}
}

// cut gives c's body, still coming, bodyGrace to arrive; d.mu is held.
func cut(c net.Conn, cd *connDrain) {
	cd.cut = true
	c.SetReadDeadline(time.Now().Add(bodyGrace))
}

// drain gives the bodies still coming bodyGrace, closes ln and waits, up
// to grace, until no connection has been idle for less than drainQuiet.
func (d *drainer) drain(ln net.Listener, grace time.Duration) {
	d.mu.Lock()
	d.draining.Store(true)
	for c, cd := range d.conns {
		if cd.body && !cd.idle {
			cut(c, cd)
		}
	}
	d.mu.Unlock()
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
