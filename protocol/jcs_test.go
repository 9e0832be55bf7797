package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var jcsTests = []struct{ in, want string }{
	{`{"b":2,"a":1}`, `{"a":1,"b":2}`},
	{` [ 1 , 2.50, -0, 1e3 ] `, `[1,2.5,0,1000]`},
	{`1E21`, `1e+21`},
	{`0.000001`, `0.000001`},
	{`0.0000001`, `1e-7`},
	{`123456789012345678901234`, `1.2345678901234569e+23`},
	{`"\u00e9\u2028<>&\u001f"`, "\"é\u2028<>&\\u001f\""},
	{`{"\u20ac":1,"\r":2,"1":3,"\ud83d\ude00":4,"\u00f6":5}`, "{\"\\r\":2,\"1\":3,\"ö\":5,\"€\":1,\"😀\":4}"},
	{`null`, `null`},
	{`{"a":{"z":true,"y":[null,false]}}`, `{"a":{"y":[null,false],"z":true}}`},
	{`333333333.33333329`, `333333333.3333333`},
	{`-1.5e-9`, `-1.5e-9`},
}

func TestJCS(t *testing.T) {
	for _, tc := range jcsTests {
		got, err := JCS([]byte(tc.in))
		if err != nil {
			t.Fatalf("JCS(%s): %v", tc.in, err)
		}
		if string(got) != tc.want {
			t.Errorf("JCS(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{`{`, `1 2`, `1e999`, ``, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`, `]`, `[1}`, `{"a":1,"a":1}`, `{"a":{"b":1,"b":2}}`, `[{"x":[],"x":[]}]`} {
		if _, err := JCS([]byte(bad)); err == nil {
			t.Errorf("JCS(%s) accepted", bad)
		}
	}
	if _, err := JCS([]byte(`{"a":{"a":1},"b":{"a":2}}`)); err != nil {
		t.Errorf("the same name in two objects: %v", err)
	}
	if _, err := JCS([]byte(`{"a":1,"\u0061":2}`)); !errors.Is(err, ErrDuplicateMember) {
		t.Errorf("a name escaped the second time: %v", err)
	}
}

// FuzzJCS: what JCS takes is JSON, and its canonical form is JSON that JCS
// gives back unchanged.
func FuzzJCS(f *testing.F) {
	for _, tc := range jcsTests {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		canon, err := JCS(b)
		if err != nil {
			return
		}
		if !json.Valid(b) || !json.Valid(canon) {
			t.Fatalf("%q gave %q", b, canon)
		}
		again, err := JCS(canon)
		if err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("%q gave %q, then %q, %v", b, canon, again, err)
		}
	})
}

var duplicateMemberTests = []struct {
	in    string
	name  string
	depth int
	found bool
}{
	{`{"a":1,"b":2}`, "", 0, false},
	{`{"a":1,"a":2}`, "a", 0, true},
	{`{"a":{"b":1},"c":{"b":2}}`, "", 0, false},
	{`{"a":{"b":1,"b":2}}`, "b", 1, true},
	{`[{"k":1},{"k":1}]`, "", 0, false},
	{`[{"k":1,"k":1}]`, "k", 1, true},
	{`{"a":"a","b":"a"}`, "", 0, false},
	{`{"a":["a","a"]}`, "", 0, false},
	{`{"a":1,"\u0061":2}`, "a", 0, true},
	{`{"a\"b":1,"a\u0022b":2}`, `a"b`, 0, true},
	{`{"x":"{\"a\":1,\"a\":2}"}`, "", 0, false},
	{`{"a":1,"b":{"c":[1,{"d":2}]},"a":3}`, "a", 0, true},
	{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":3}`, "k3", 0, true},
	{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17}`, "", 0, false},
	{"{\"a\xff\":1,\"a\xfe\":2}", "a\ufffd", 0, true},
	{"{\"a\xff\":1,\"a\\ufffd\":2}", "a\ufffd", 0, true},
	{"{\"a\ufffd\":1,\"a\xff\":2}", "a\ufffd", 0, true},
	{strings.Repeat("[", 10001) + `{"a":1,"a":2}` + strings.Repeat("]", 10001), "", 0, false}, // deeper than a decode reads
}

func TestDuplicateMember(t *testing.T) {
	for _, tc := range duplicateMemberTests {
		name, depth, found := DuplicateMember([]byte(tc.in))
		if name != tc.name || depth != tc.depth || found != tc.found {
			t.Errorf("%s: %q at %d, %v; want %q at %d, %v", tc.in, name, depth, found, tc.name, tc.depth, tc.found)
		}
	}
}

// FuzzDuplicateMember holds DuplicateMember to a decode that sees every
// member: on JSON, it finds a name twice exactly when a token-by-token read
// does.
func FuzzDuplicateMember(f *testing.F) {
	for _, tc := range duplicateMemberTests {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		_, _, found := DuplicateMember(b)
		if want := tokenDuplicate(json.NewDecoder(bytes.NewReader(b))); found != want {
			t.Fatalf("%q: found %v, a token read %v", b, found, want)
		}
	})
}

// tokenDuplicate reads one value by tokens and reports a name held twice.
func tokenDuplicate(dec *json.Decoder) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	switch tok {
	case json.Delim('['):
		dup := false
		for dec.More() {
			dup = tokenDuplicate(dec) || dup
		}
		dec.Token()
		return dup
	case json.Delim('{'):
		seen, dup := map[string]bool{}, false
		for dec.More() {
			k, _ := dec.Token()
			dup = dup || seen[k.(string)]
			seen[k.(string)] = true
			dup = tokenDuplicate(dec) || dup
		}
		dec.Token()
		return dup
	}
	return false
}

func TestJSONDepth(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`1`, 0},
		{`"[[{"`, 0},
		{`[]`, 1},
		{`{"a":[1,{"b":[]}]}`, 4},
		{`["\"[", ["\\"], {}]`, 2},
		{strings.Repeat("[", 101) + strings.Repeat("]", 101), 101},
	} {
		if got := JSONDepth([]byte(tc.in)); got != tc.want {
			t.Errorf("JSONDepth(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
