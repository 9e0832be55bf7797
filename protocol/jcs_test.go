package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
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
