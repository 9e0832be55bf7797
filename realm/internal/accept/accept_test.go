package accept

import "testing"

var qualityTests = []struct {
	header, mt string
	q          float64
	spec       int
}{
	{"", "text/html", 0, None},
	{"*/*", "text/html", 1, Any},
	{"*", "text/html", 1, Any},
	{"text/*;q=0.5, */*;q=0.1", "text/html", 0.5, AnySub},
	{"text/html;q=0, */*", "text/html", 0, Exact},
	{"TEXT/HTML;Q=0.3", "text/html", 0.3, Exact},
	{"text/html;q=0.2, text/html;q=0.7", "text/html", 0.7, Exact},
	{"text/html;q=2, */*;q=0.4", "text/html", 0.4, Any},
	{"text/html;q=NaN", "text/html", 0, None},
	{"text/html;q=abc", "text/html", 0, None},
	{"text/html;level=1;q=0.6;ext=x", "text/html", 0.6, Exact},
	{"*/html", "text/html", 0, None},
	{"application/json", "text/html", 0, None},
	{"garbage, ;;, /", "text/html", 0, None},
}

func TestQuality(t *testing.T) {
	for _, tc := range qualityTests {
		q, spec := Quality(Parse(tc.header), tc.mt)
		if q != tc.q || spec != tc.spec {
			t.Errorf("Quality(Parse(%q), %q) = %v, %d; want %v, %d", tc.header, tc.mt, q, spec, tc.q, tc.spec)
		}
	}
}

// FuzzParse: every range kept is a media range with a q in 0..1.
func FuzzParse(f *testing.F) {
	for _, tc := range qualityTests {
		f.Add(tc.header)
	}
	f.Fuzz(func(t *testing.T, h string) {
		for _, r := range Parse(h) {
			if !(r.Q >= 0 && r.Q <= 1) || r.Type == "" || r.Sub == "" || (r.Type == "*" && r.Sub != "*") {
				t.Fatalf("Parse(%q) kept %+v", h, r)
			}
		}
	})
}
