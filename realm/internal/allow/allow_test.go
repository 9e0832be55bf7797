package allow

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

func TestOf(t *testing.T) {
	mux := http.NewServeMux()
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux.Handle("GET /a", nop)
	mux.Handle("POST /a", nop)
	mux.Handle("DELETE /b/{id}", nop)
	mux.Handle("/c/", nop)
	for _, tc := range []struct {
		path, except string
		want         []string
	}{
		{"/a", "", []string{"GET", "HEAD", "POST"}}, // GET serves HEAD too
		{"/b/1", "", []string{"DELETE"}},
		{"/nothing", "", nil},
		{"/c/x", "", Methods},
		{"/c/x", "/c/", nil},
	} {
		r := httptest.NewRequest("PUT", tc.path, nil)
		if got := Of(mux, r, tc.except); !slices.Equal(got, tc.want) {
			t.Errorf("Of(%s, except %q) = %v, want %v", tc.path, tc.except, got, tc.want)
		}
	}
}
