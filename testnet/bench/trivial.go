package bench

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// TrivialHandler is the ceiling's server: it reads and decodes the same JSON
// body a post carries and answers a small JSON object, with no store, no
// authentication and no routing, so what it costs is net/http and
// encoding/json alone.
func TrivialHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Kind string `json:"kind"`
			Body string `json:"body"`
		}
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err == nil {
			err = json.Unmarshal(raw, &in)
		}
		if err != nil || in.Kind == "" {
			http.Error(w, `{"reason":"invalid_body"}`, http.StatusBadRequest)
			return
		}
		out, _ := json.Marshal(struct {
			OK    bool   `json:"ok"`
			Kind  string `json:"kind"`
			Bytes int    `json:"bytes"`
		}{true, in.Kind, len(in.Body)})
		out = append(out, '\n')
		h := w.Header()
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(http.StatusOK)
		w.Write(out)
	})
}

// TrivialServer serves TrivialHandler on 127.0.0.1.
type TrivialServer struct {
	URL string
	srv *http.Server
	ln  net.Listener
	err chan error
}

// StartTrivial serves TrivialHandler on a port chosen by the kernel, with
// the node's server timeouts.
func StartTrivial() (*TrivialServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &TrivialServer{
		URL: "http://" + ln.Addr().String(),
		srv: &http.Server{
			Handler:           TrivialHandler(),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       2 * time.Minute,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
		},
		ln:  ln,
		err: make(chan error, 1),
	}
	go func() { s.err <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *TrivialServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.err; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
