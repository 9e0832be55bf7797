package protocol

import "testing"

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
	for _, bad := range []string{`{`, `1 2`, `1e999`} {
		if _, err := JCS([]byte(bad)); err == nil {
			t.Errorf("JCS(%s) accepted", bad)
		}
	}
}
