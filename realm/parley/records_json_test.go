package parley

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"relay/realm/internal/jsonenc"
)

// marshalRecord is json.Marshal, by hand for the records that can.
func marshalRecord(v any) (out []byte, err error) {
	err = withRecordJSON(v, func(b []byte) error {
		out = bytes.Clone(b)
		return nil
	})
	return out, err
}

// trickyStrings are what JSON escaping has cases for.
var trickyStrings = []string{
	"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "line\nfeed\r\ttab\b\f", "\x00\x01\x1f\x7f",
	"\u2028\u2029", "emoji 🙂 and ünïcödé", "bad \xff utf-8 \xc3", "\xed\xa0\x80", "…",
}

// fillRandom sets every field reachable from v (a pointer) to a random
// value, so that a field added to a record is covered without naming it.
func fillRandom(r *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if r.IntN(4) == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fillRandom(r, v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(randomTime(r)))
			return
		}
		for i := range v.NumField() {
			fillRandom(r, v.Field(i))
		}
	case reflect.String:
		if r.IntN(3) == 0 {
			v.SetString(trickyStrings[r.IntN(len(trickyStrings))])
			return
		}
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		v.SetString(string(b))
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		v.SetInt([]int64{0, 1, -1, math.MaxInt64, math.MinInt64, r.Int64()}[r.IntN(6)])
	case reflect.Uint64:
		v.SetUint([]uint64{0, 1, math.MaxUint64, r.Uint64()}[r.IntN(4)])
	case reflect.Slice:
		switch r.IntN(3) {
		case 0:
			v.SetZero()
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			n := 1 + r.IntN(3)
			v.Set(reflect.MakeSlice(v.Type(), n, n))
			for i := range n {
				fillRandom(r, v.Index(i))
			}
		}
	case reflect.Map:
		switch r.IntN(3) {
		case 0:
			v.SetZero()
		case 1:
			v.Set(reflect.MakeMap(v.Type()))
		default:
			m := randomJSONValue(r, 2)
			for _, ok := m.(map[string]any); !ok; _, ok = m.(map[string]any) {
				m = randomJSONValue(r, 2)
			}
			v.Set(reflect.ValueOf(m))
		}
	case reflect.Interface:
		v.Set(reflect.ValueOf(randomJSONValue(r, 2)))
	default:
		panic("fillRandom: no case for " + v.Type().String())
	}
}

func randomTime(r *rand.Rand) time.Time {
	base := time.UnixMilli(r.Int64N(4102444800000)).UTC()
	switch r.IntN(8) {
	case 0:
		return time.Time{}
	case 1:
		return base.Add(time.Duration(r.IntN(1e6))) // nanoseconds
	case 2:
		return base.In(time.FixedZone("", 5*3600+30*60))
	case 3:
		return base.In(time.FixedZone("UTC", 0)) // a UTC that is not time.UTC
	case 4:
		return base.AddDate(10000, 0, 0) // MarshalJSON refuses it
	case 5:
		return base.In(time.FixedZone("odd", 17)) // an offset with seconds: refused too
	}
	return base
}

func randomJSONValue(r *rand.Rand, depth int) any {
	n := 6
	if depth > 0 {
		n = 8
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return trickyStrings[r.IntN(len(trickyStrings))]
	case 2:
		return r.NormFloat64() * 1e6
	case 3:
		return int64(r.Uint64())
	case 4:
		return uint64(math.MaxUint64)
	case 5:
		return r.IntN(2) == 0
	case 6:
		m := map[string]any{}
		for range r.IntN(4) {
			m[trickyStrings[r.IntN(len(trickyStrings))]] = randomJSONValue(r, depth-1)
		}
		return m
	}
	a := []any{}
	for range r.IntN(4) {
		a = append(a, randomJSONValue(r, depth-1))
	}
	return a
}

// Every hand-encoded record encodes byte for byte as encoding/json does,
// errors included, for random values of every field.
func TestRecordJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	types := []reflect.Type{
		reflect.TypeFor[threadRec](), reflect.TypeFor[Board](), reflect.TypeFor[messageRec](), reflect.TypeFor[cidRef](),
	}
	for _, typ := range types {
		for i := range 5000 {
			p := reflect.New(typ)
			fillRandom(r, p.Elem())
			want, werr := json.Marshal(p.Interface())
			got, gerr := marshalRecord(p.Interface())
			if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("%v #%d:\nhand:          %s (%v)\nencoding/json: %s (%v)", typ, i, got, gerr, want, werr)
			}
		}
	}
}

func FuzzJSONString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := jsonenc.AppendHTMLString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: hand %s, encoding/json %s", s, got, want)
		}
	})
}

func BenchmarkRecordJSON(b *testing.B) {
	at := time.UnixMilli(1764400000000).UTC()
	t := &threadRec{Realm: "test", N: 12, CID: "bafyreigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", Board: 1,
		Title: "Benchmark thread of agent 3: where does the time go?", Creator: "test:bench-3", CreatedAt: at, UpdatedAt: at,
		StateAt: at, Awaiting: true, Messages: 1200, Last: lastMessage{N: 40000, Realm: "test", Kind: "note", Identity: "test:bench-3", At: at, Sequence: 90000}}
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshalRecord(t); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(t); err != nil {
				b.Fatal(err)
			}
		}
	})
}
