package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"relay/protocol"
)

// plainIn reaches no interface: Handler binds it with Unmarshal.
type plainIn struct {
	ID     protocol.KeyRef   `json:"id"`
	N      int               `json:"n,omitempty"`
	U      uint8             `json:"u,omitempty"`
	F      float64           `json:"f,omitempty"`
	S      *string           `json:"s,omitempty"`
	Tags   []string          `json:"tags,omitempty"`
	Raw    json.RawMessage   `json:"raw,omitempty"`
	Counts map[string]int    `json:"counts,omitempty"`
	Kinds  *[]string         `json:"kinds,omitempty"`
	Sub    *plainSub         `json:"sub,omitempty"`
	Subs   []plainSub        `json:"subs,omitempty"`
	Refs   []protocol.KeyRef `json:"refs,omitempty"`
	Num    json.Number       `json:"num,omitempty"`
}

type plainSub struct {
	K string    `json:"k"`
	V int       `json:"v,omitempty"`
	R *plainSub `json:"r,omitempty"`
}

type reachTest struct {
	name string
	t    reflect.Type
	want bool
}

var reachTests = []reachTest{
	{"plain", reflect.TypeFor[plainIn](), false},
	{"cycle", reflect.TypeFor[plainSub](), false},
	{"no input", reflect.TypeFor[NoInput](), false},
	{"any", reflect.TypeFor[any](), true},
	{"map value", reflect.TypeFor[map[string]any](), true},
	{"envelope's provenance", reflect.TypeFor[protocol.Envelope](), true},
	{"deep in a pointer to a slice", reflect.TypeFor[struct {
		A *[]struct{ B [1]map[string]error }
	}](), true},
	{"unexported field", reflect.TypeFor[struct{ a any }](), true},
	{"validateIn", reflect.TypeFor[validateIn](), true},
}

func TestReachesInterface(t *testing.T) {
	for _, tc := range reachTests {
		if got := reachesInterface(tc.t, map[reflect.Type]bool{}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// bindInputs are arguments, each one JSON object as Invoke hands them over,
// that decode or fail to decode into plainIn in every way.
var bindInputs = []string{
	`{}`, `{"id":"th_1"}`, `{"id":12}`, `{"id":-1}`, `{"id":1.5}`, `{"id":null}`, `{"id":true}`, `{"id":{}}`,
	`{"n":1e300}`, `{"n":1.5}`, `{"n":"1"}`, `{"n":-9223372036854775809}`, `{"n":9223372036854775807}`,
	`{"u":256}`, `{"u":-1}`, `{"u":255}`, `{"f":1e400}`, `{"f":-0}`, `{"f":"x"}`,
	`{"s":null}`, `{"s":"x"}`, `{"s":1}`, `{"tags":["a",1,"b"]}`, `{"tags":"a"}`, `{"tags":null}`,
	`{"raw":{"a":[1,2,{"b":null}]}}`, `{"raw":null}`, `{"raw":1e400}`, `{"counts":{"a":1,"b":"x"}}`, `{"counts":[]}`,
	`{"kinds":[]}`, `{"kinds":null}`, `{"sub":{"k":"x","r":{"k":"y","v":"z"}}}`, `{"subs":[{"k":1},{"v":2}]}`,
	`{"refs":[1,"a",-2]}`, `{"num":12.5e3}`, `{"num":"12"}`, `{"num":"x"}`,
	// Several errors: the first in the text is the one reported.
	`{"n":"x","u":-1,"id":-1}`, `{"id":-1,"n":"x"}`, `{"tags":[1],"n":"x"}`,
	// Duplicates, escapes, text that is not UTF-8, unknown fields, case.
	`{"n":"x","n":1}`, `{"n":1,"n":"x"}`, `{"\u0069d":"a"}`, `{"ID":"upper"}`, `{"Id":1,"id":2}`, `{"other":[1,{}]}`,
	"{\"id\":\"\xff\\ud800\"}", ` {"id":"a"} `,
}

func bindBoth(args string) (plainIn, error, plainIn, error) {
	c := &Call{Args: json.RawMessage(args)}
	var a, b plainIn
	errA := c.Bind(&a)
	errB := c.bindPlain(&b)
	return a, errA, b, errB
}

func sameBind(t testing.TB, args string) {
	t.Helper()
	a, errA, b, errB := bindBoth(args)
	if fmt.Sprint(errA) != fmt.Sprint(errB) || !reflect.DeepEqual(a, b) {
		t.Errorf("%.200q: decoder %+v, %v; Unmarshal %+v, %v", args, a, errA, b, errB)
	}
	var refA, refB *protocol.Refusal
	if errA != nil && (!asRefusal(errA, &refA) || !asRefusal(errB, &refB) || !equalDetails(refA.Details, refB.Details) || refA.Reason != refB.Reason) {
		t.Errorf("%.200q: refused %+v, before %+v", args, refB, refA)
	}
}

func asRefusal(err error, ref **protocol.Refusal) bool {
	r, ok := err.(*protocol.Refusal)
	*ref = r
	return ok
}

// Unmarshal binds an input that reaches no interface exactly as the
// decoder with UseNumber does: the same value, the same refusal.
func TestBindPlainAsDecoder(t *testing.T) {
	for _, in := range bindInputs {
		sameBind(t, in)
	}
}

// FuzzBind holds the two binds to each other on any one JSON value.
func FuzzBind(f *testing.F) {
	for _, in := range bindInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return // Invoke hands over one JSON value, or refuses
		}
		sameBind(t, string(in))
	})
}

// TestArgValueBeyond64Bits: an integer in a URL beyond 64 bits is the
// nearest one within, for a handler to clamp or refuse by its bounds.
func TestArgValueBeyond64Bits(t *testing.T) {
	s := &jsonschema.Schema{Type: "integer"}
	for in, want := range map[string]any{
		"12":                    int64(12),
		"99999999999999999999":  int64(math.MaxInt64),
		"-99999999999999999999": int64(math.MinInt64),
		"1.5":                   json.Number("1.5"),
		"x":                     "x",
		// A whole number written with a fraction or an exponent is
		// the integer it is, as MCP's arguments read it.
		"2.0":    int64(2),
		"1e2":    int64(100),
		"2.50e1": int64(25),
		"-3.00":  int64(-3),
		"1e30":   json.Number("1e30"),
	} {
		if got := ArgValue(s, []string{in}); got != want {
			t.Errorf("ArgValue(%q) = %#v, want %#v", in, got, want)
		}
	}
	// A key or its number: digits beyond 64 bits stay what was sent.
	key := &jsonschema.Schema{Types: []string{"string", "integer"}}
	for in, want := range map[string]any{
		"12":                   int64(12),
		"18446744073709551616": "18446744073709551616",
		"th_3":                 "th_3",
		"-4":                   int64(-4),
		"012":                  "012",
		"+12":                  "+12",
		"-0":                   "-0",
		"2.0":                  "2.0",
	} {
		if got := ArgValue(key, []string{in}); got != want {
			t.Errorf("ArgValue(key, %q) = %#v, want %#v", in, got, want)
		}
	}
}

// TestInvokeBeyond64Bits: an integer argument beyond 64 bits written in
// JSON is what ArgValue makes of the same digits in a URL, the nearest
// one within, whatever the transport; a key or its number, and members
// deeper down, are left to the bind.
func TestInvokeBeyond64Bits(t *testing.T) {
	type in struct {
		N   int64           `json:"n,omitempty"`
		Min *uint64         `json:"min,omitempty"`
		ID  protocol.KeyRef `json:"id,omitempty"`
		Sub *struct {
			N int64 `json:"n"`
		} `json:"sub,omitempty"`
	}
	var got in
	op := Define("get_wide", "GET", "/wide", "test", Public, func(_ context.Context, _ *Call, v in) (struct{}, error) {
		got = v
		return struct{}{}, nil
	})
	NewRegistry().Add(op)
	for _, tc := range []struct {
		args        string
		want        int64
		field, rule string
	}{
		{`{"n":99999999999999999999}`, math.MaxInt64, "", ""},
		{`{"n":-99999999999999999999}`, math.MinInt64, "", ""},
		{`{"n": 99999999999999999999 , "id":"th_1"}`, math.MaxInt64, "", ""},
		{`{"n":9223372036854775807}`, math.MaxInt64, "", ""},
		{`{"min":-99999999999999999999}`, 0, "min", "minimum"},
		{`{"id":"99999999999999999999"}`, 0, "", ""},
		{`{"sub":{"n":99999999999999999999}}`, 0, "sub.n", "maximum"},
		{`{"n":99999999999999999999.5}`, 0, "n", "maximum"}, // not an integer literal: the bind's
	} {
		got = in{}
		_, err := NewRegistry().Invoke(context.Background(), nil, op, json.RawMessage(tc.args))
		if tc.field == "" {
			if err != nil || got.N != tc.want {
				t.Errorf("%s: n=%d, %v; want %d", tc.args, got.N, err, tc.want)
			}
			continue
		}
		var ref *protocol.Refusal
		if !errors.As(err, &ref) || ref.Details["field"] != tc.field || ref.Details["rule"] != tc.rule {
			t.Errorf("%s: %v, want field %q rule %s", tc.args, err, tc.field, tc.rule)
		}
	}
}

// TestInvokeWholeNumbers: a whole number written with a fraction or an
// exponent is the integer it is, as JSON Schema and so the input schema
// say, for a client that keeps every number a float (2.0), with or
// without an interface in the input; a fraction, a number beyond 64 bits
// and members deeper down are refused as before.
func TestInvokeWholeNumbers(t *testing.T) {
	type in struct {
		N   int64           `json:"n,omitempty"`
		U   *uint8          `json:"u,omitempty"`
		ID  protocol.KeyRef `json:"id,omitempty"`
		Sub *struct {
			N int64 `json:"n"`
		} `json:"sub,omitempty"`
	}
	type withInterface struct {
		N   int64           `json:"n,omitempty"`
		U   *uint8          `json:"u,omitempty"`
		ID  protocol.KeyRef `json:"id,omitempty"`
		Sub *struct {
			N int64 `json:"n"`
		} `json:"sub,omitempty"`
		Any any `json:"any,omitempty"`
	}
	var got in
	plain := Define("get_whole", "GET", "/whole", "test", Public, func(_ context.Context, _ *Call, v in) (struct{}, error) {
		got = v
		return struct{}{}, nil
	})
	withAny := Define("get_whole_any", "GET", "/whole/any", "test", Public, func(_ context.Context, c *Call, v withInterface) (struct{}, error) {
		got = in{N: v.N, U: v.U, ID: v.ID}
		return struct{}{}, nil
	})
	for _, op := range []*Operation{plain, withAny} {
		// A key or its number, as the forum's operations take it.
		op.Input.Properties["id"].Type, op.Input.Properties["id"].Types = "", []string{"string", "integer"}
	}
	NewRegistry().Add(plain, withAny)
	for _, tc := range []struct {
		args        string
		n           int64
		u           uint8
		id          string
		field, rule string
	}{
		{args: `{"n":2.0}`, n: 2},
		{args: `{"n":1e2}`, n: 100},
		{args: `{"n":1E+2,"u":2.50e1}`, n: 100, u: 25},
		{args: `{"n":-3.000}`, n: -3},
		{args: `{"n":0.5e1}`, n: 5},
		{args: `{"n":-0.0}`, n: 0},
		{args: `{"n":922337203685477580.7e1}`, n: math.MaxInt64},
		{args: `{"id":12.0}`, id: "12"},
		{args: `{"n":2.5}`, field: "n", rule: "type"},
		{args: `{"n":1e19}`, field: "n", rule: "maximum"},
		{args: `{"u":2.56e2}`, field: "u", rule: "maximum"},
		{args: `{"sub":{"n":2.0}}`, field: "sub.n", rule: "type"},
	} {
		for _, op := range []*Operation{plain, withAny} {
			got = in{}
			_, err := NewRegistry().Invoke(context.Background(), nil, op, json.RawMessage(tc.args))
			if tc.field != "" {
				var ref *protocol.Refusal
				if !errors.As(err, &ref) || ref.Details["field"] != tc.field || ref.Details["rule"] != tc.rule {
					t.Errorf("%s %s: %v, want field %q rule %s", op.Key, tc.args, err, tc.field, tc.rule)
				}
				continue
			}
			u := uint8(0)
			if got.U != nil {
				u = *got.U
			}
			if err != nil || got.N != tc.n || u != tc.u || string(got.ID) != tc.id {
				t.Errorf("%s %s: n=%d u=%d id=%q, %v; want n=%d u=%d id=%q", op.Key, tc.args, got.N, u, string(got.ID), err, tc.n, tc.u, tc.id)
			}
		}
	}
}

// FuzzWholeLiteral holds wholeLiteral to exact arithmetic on any JSON
// number: it answers the integer the number is, when that is whole and
// within 64 bits (unsigned, or signed when negative), and nothing
// otherwise; and never for a plain integer literal, which binds as it is.
func FuzzWholeLiteral(f *testing.F) {
	for _, s := range []string{"2.0", "1e2", "0.5e1", "-1.0", "1.5", "1e-2", "0.0", "-0.0", "12", "18446744073709551615.0",
		"18446744073709551616.0", "-9223372036854775808.0", "-9223372036854775809e0", "1E+40", "10e-1", "123.4500e2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var n json.Number
		if json.Unmarshal([]byte(text), &n) != nil || string(n) != text {
			return // not one JSON number alone
		}
		got, whole := wholeLiteral(text)
		exact, ok := new(big.Rat).SetString(text)
		if !ok { // an exponent too large for big.Rat: only zero is whole then
			if whole && got != "0" {
				t.Fatalf("wholeLiteral(%q) = %q", text, got)
			}
			return
		}
		in := exact.IsInt() && !isIntegerLiteral(text) &&
			(exact.Sign() >= 0 && exact.Num().IsUint64() || exact.Sign() < 0 && exact.Num().IsInt64())
		if whole != in {
			t.Fatalf("wholeLiteral(%q) whole = %v, want %v", text, whole, in)
		}
		if whole && got != exact.Num().String() {
			t.Fatalf("wholeLiteral(%q) = %q, want %s", text, got, exact.Num().String())
		}
	})
}

// A call whose arguments hold no number binds as the decoder with
// UseNumber does, into interfaces too, and refuses the same.
func TestBindNumberless(t *testing.T) {
	type anyIn struct {
		ID  protocol.KeyRef `json:"id"`
		Map map[string]any  `json:"map"`
		Any any             `json:"any"`
		S   string          `json:"s"`
	}
	for _, args := range []string{
		`{}`, `{"id":"th_1"}`, `{"map":{"a":["x",true,null,{"b":"c"}]},"any":"s"}`, `{"any":[]}`, `{"any":{"k":[[]]}}`,
		`{"map":"x"}`, `{"id":true}`, `{"s":["x"]}`, `{"map":{"a":"x"},"map":{"b":"y"}}`, "{\"s\":\"\xff\"}",
	} {
		var a, b anyIn
		errA := (&Call{Args: json.RawMessage(args)}).Bind(&a)
		errB := (&Call{Args: json.RawMessage(args), numberless: true}).Bind(&b)
		if fmt.Sprint(errA) != fmt.Sprint(errB) || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: decoder %+v, %v; numberless %+v, %v", args, a, errA, b, errB)
		}
	}
}

// FuzzStartsInteger: text that startsInteger turns away is text ParseInt
// refuses as no integer, so ArgValue need not ask it.
func FuzzStartsInteger(f *testing.F) {
	for _, s := range []string{"12", "-4", "+12", "", "-", "+", "1_000", "0x10", " 1", "th_3", "١٢", "99999999999999999999", "18700000000000000000A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := strconv.ParseInt(s, 10, 64); !startsInteger(s) && !errors.Is(err, strconv.ErrSyntax) {
			t.Errorf("%q: turned away, but ParseInt says %v", s, err)
		}
	})
}
