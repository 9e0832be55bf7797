package protocol

import (
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
)

// tagLink is the CBOR tag DAG-CBOR uses for a CID link.
const tagLink = 42

// MaxEventSize bounds one encoded event, data and signature included. The
// corpus's largest legal event is 102,400 bytes of JSON; CBOR is smaller, so
// this leaves room without letting a peer hand us unbounded frames. Blobs
// (images) never travel inside events, only by CID.
const MaxEventSize = 256 << 10

// maxDataDepth bounds the nesting of arrays, maps and tags in one item, event
// data included. An event is one level deeper than its data (the envelope),
// so it is decoded with a limit one higher: otherwise Sign would accept data
// nested maxDataDepth deep and every DecodeEvent of the result would fail.
const maxDataDepth = 32

var (
	encMode      cbor.EncMode
	decMode      cbor.DecMode // data and any other single item
	eventDecMode cbor.DecMode // an event: decMode plus one level for the envelope
	fieldsMode   cbor.DecMode // decMode, unknown fields skipped (DecodeDataFields)
)

func init() {
	var err error
	encMode, err = cbor.EncOptions{
		Sort:          cbor.SortLengthFirst,
		ShortestFloat: cbor.ShortestFloatNone,
		NaNConvert:    cbor.NaNConvertReject,
		InfConvert:    cbor.InfConvertReject,
		IndefLength:   cbor.IndefLengthForbidden,
		BigIntConvert: cbor.BigIntConvertReject,
		TagsMd:        cbor.TagsAllowed,
		Time:          cbor.TimeUnixMicro,
	}.EncMode()
	if err != nil {
		panic(err)
	}
	decOpts := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsAllowed,
		MaxNestedLevels:   maxDataDepth,
		MaxArrayElements:  65536,
		MaxMapPairs:       65536,
		DefaultMapType:    reflect.TypeOf(map[string]any(nil)),
		UTF8:              cbor.UTF8RejectInvalid,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		BigIntDec:         cbor.BigIntDecodePointer,
	}
	decMode, err = decOpts.DecMode()
	if err != nil {
		panic(err)
	}
	lenient := decOpts
	lenient.ExtraReturnErrors = cbor.ExtraDecErrorNone
	if fieldsMode, err = lenient.DecMode(); err != nil {
		panic(err)
	}
	decOpts.MaxNestedLevels = maxDataDepth + 1
	eventDecMode, err = decOpts.DecMode()
	if err != nil {
		panic(err)
	}
}

// MarshalCanonical encodes v as canonical DAG-CBOR.
func MarshalCanonical(v any) ([]byte, error) { return encMode.Marshal(v) }

// UnmarshalStrict decodes canonical DAG-CBOR into v, refusing unknown struct
// fields and duplicate keys. It does not check canonical form: see
// CheckCanonical.
func UnmarshalStrict(b []byte, v any) error { return decMode.Unmarshal(b, v) }

// EncodeData encodes an event's data, which must be a map or a struct.
func EncodeData(v any) (cbor.RawMessage, error) {
	b, err := encMode.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || b[0]>>5 != 5 { // major type 5: map
		return nil, fmt.Errorf("%w: data must be a map", ErrInvalidEvent)
	}
	return b, nil
}

// DecodeData decodes an event's data into v.
func DecodeData(data cbor.RawMessage, v any) error { return decMode.Unmarshal(data, v) }

// DecodeDataFields decodes some fields of an event's data into v, a struct
// naming only those: the others are skipped, not refused.
func DecodeDataFields(data cbor.RawMessage, v any) error { return fieldsMode.Unmarshal(data, v) }

// CheckCanonical reports whether b is one canonical DAG-CBOR item, as
// relay encodes them and decodes them generically: shortest heads, definite
// lengths, maps with text keys sorted length-first and none twice, valid
// UTF-8, integers within 64 bits, floats only as float64 and neither NaN
// nor infinite, true, false and null, tag 42 over a CID link and no other,
// at most maxDataDepth levels of arrays and maps, 65,536 elements or pairs
// in one. Any difference is ErrNonCanonical. It reads b once and
// allocates nothing: it runs for every event signed and every one received.
func CheckCanonical(b []byte) error {
	n, err := canonicalItem(b, 0)
	if err != nil {
		return err
	}
	if n != len(b) {
		return fmt.Errorf("%w: trailing bytes", ErrNonCanonical)
	}
	return nil
}

// maxContainer bounds the elements of an array or the pairs of a map, as
// the decoder does.
const maxContainer = 65536

// canonicalHead reads the head of the item at b: its major type, its
// argument and the head's length, refusing a head that is not the
// shortest for its argument, an indefinite length and reserved values.
func canonicalHead(b []byte) (major byte, arg uint64, n int, err error) {
	if len(b) == 0 {
		return 0, 0, 0, fmt.Errorf("%w: truncated", ErrNonCanonical)
	}
	major, info := b[0]>>5, b[0]&0x1f
	switch {
	case info < 24:
		return major, uint64(info), 1, nil
	case info > 27:
		return 0, 0, 0, fmt.Errorf("%w: indefinite length or reserved head 0x%02x", ErrNonCanonical, b[0])
	}
	n = 1 << (info - 24) // 1, 2, 4 or 8 bytes follow
	if len(b) < 1+n {
		return 0, 0, 0, fmt.Errorf("%w: truncated", ErrNonCanonical)
	}
	for _, c := range b[1 : 1+n] {
		arg = arg<<8 | uint64(c)
	}
	if major == 7 { // floats and simple values: checked by the caller
		return major, arg, 1 + n, nil
	}
	if min := [4]uint64{24, 1 << 8, 1 << 16, 1 << 32}[info-24]; arg < min {
		return 0, 0, 0, fmt.Errorf("%w: head of 0x%02x not the shortest", ErrNonCanonical, b[0])
	}
	return major, arg, 1 + n, nil
}

// canonicalItem checks the item at the start of b, within depth levels
// of arrays and maps, and returns its length. A link's tag is no level:
// it holds a byte string, never a container.
func canonicalItem(b []byte, depth int) (int, error) {
	major, arg, n, err := canonicalHead(b)
	if err != nil {
		return 0, err
	}
	rest := uint64(len(b) - n)
	switch major {
	case 0: // unsigned integer
		return n, nil
	case 1: // negative integer: -1-arg within int64
		if arg > math.MaxInt64 {
			return 0, fmt.Errorf("%w: integer beyond 64 bits", ErrNonCanonical)
		}
		return n, nil
	case 2, 3: // byte and text strings
		if arg > rest {
			return 0, fmt.Errorf("%w: truncated", ErrNonCanonical)
		}
		end := n + int(arg)
		if major == 3 && !utf8.Valid(b[n:end]) {
			return 0, fmt.Errorf("%w: text not UTF-8", ErrNonCanonical)
		}
		return end, nil
	case 4, 5: // arrays and maps
		if depth++; depth > maxDataDepth {
			return 0, fmt.Errorf("%w: nested deeper than %d", ErrNonCanonical, maxDataDepth)
		}
		if arg > maxContainer {
			return 0, fmt.Errorf("%w: more than %d elements", ErrNonCanonical, maxContainer)
		}
		var prev []byte // the map's previous key, as encoded
		for range arg {
			if major == 5 {
				if len(b) == n || b[n]>>5 != 3 {
					return 0, fmt.Errorf("%w: map key not text", ErrNonCanonical)
				}
				k, err := canonicalItem(b[n:], depth)
				if err != nil {
					return 0, err
				}
				key := b[n : n+k]
				if prev != nil && (len(key) < len(prev) || len(key) == len(prev) && string(key) <= string(prev)) {
					return 0, fmt.Errorf("%w: map keys out of order or repeated", ErrNonCanonical)
				}
				prev, n = key, n+k
			}
			m, err := canonicalItem(b[n:], depth)
			if err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	case 6: // tags: 42, a link, only
		if arg != tagLink {
			return 0, fmt.Errorf("%w: tag %d", ErrNonCanonical, arg)
		}
		cm, carg, cn, err := canonicalHead(b[n:])
		if err != nil {
			return 0, err
		}
		if cm != 2 || carg > uint64(len(b)-n-cn) {
			return 0, fmt.Errorf("%w: malformed link", ErrNonCanonical)
		}
		raw := b[n+cn : n+cn+int(carg)]
		if len(raw) < 2 || raw[0] != 0 {
			return 0, fmt.Errorf("%w: malformed link", ErrNonCanonical)
		}
		if _, err := cid.Cast(raw[1:]); err != nil {
			return 0, fmt.Errorf("%w: malformed link: %v", ErrNonCanonical, err)
		}
		return n + cn + int(carg), nil
	default: // 7: false, true, null and float64
		switch {
		case n == 1 && arg >= 20 && arg <= 22:
			return n, nil
		case n == 9:
			if f := math.Float64frombits(arg); math.IsNaN(f) || math.IsInf(f, 0) {
				return 0, fmt.Errorf("%w: NaN or infinity", ErrNonCanonical)
			}
			return n, nil
		}
		return 0, fmt.Errorf("%w: simple value or float 0x%02x", ErrNonCanonical, b[0])
	}
}

// Link is a CID that encodes as a DAG-CBOR link (tag 42).
type Link struct{ cid.Cid }

// MarshalCBOR encodes l as tag 42 over a byte string 0x00 ‖ CID bytes.
func (l Link) MarshalCBOR() ([]byte, error) {
	if !l.Defined() {
		return encMode.Marshal(nil)
	}
	return encMode.Marshal(cbor.Tag{Number: tagLink, Content: append([]byte{0}, l.Bytes()...)})
}

// UnmarshalCBOR decodes a tag-42 link.
func (l *Link) UnmarshalCBOR(b []byte) error {
	if len(b) == 1 && b[0] == 0xf6 { // null: no link
		l.Cid = cid.Undef
		return nil
	}
	var t cbor.RawTag
	if err := decMode.Unmarshal(b, &t); err != nil {
		return err
	}
	if t.Number != tagLink {
		return fmt.Errorf("%w: tag %d is not a link", ErrInvalidEvent, t.Number)
	}
	var raw []byte
	if err := decMode.Unmarshal(t.Content, &raw); err != nil {
		return err
	}
	if len(raw) < 2 || raw[0] != 0 {
		return fmt.Errorf("%w: malformed link", ErrInvalidEvent)
	}
	c, err := cid.Cast(raw[1:])
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	l.Cid = c
	return nil
}
