// Package allow finds the methods under which a ServeMux serves a
// request's path: the Allow header of a 405 (RFC 9110, section 15.5.6).
package allow

import "net/http"

// Methods are the methods Of tries, in the order an Allow header lists
// them.
var Methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// Of returns the methods of Methods under which mux routes r's path to a
// pattern other than except (a catch-all that serves every method; ""
// for none).
func Of(mux *http.ServeMux, r *http.Request, except string) []string {
	var out []string
	for _, m := range Methods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != except {
			out = append(out, m)
		}
	}
	return out
}
