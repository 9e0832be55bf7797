package protocol

import (
	"bytes"
	"fmt"
	"math"
	"reflect"

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

// CheckCanonical reports whether b is one canonical DAG-CBOR item: it decodes
// b generically, checks that every value is one DAG-CBOR allows, re-encodes
// it and compares. Any difference is ErrNonCanonical.
func CheckCanonical(b []byte) error {
	var v any
	rest, err := decMode.UnmarshalFirst(b, &v)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNonCanonical, err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: trailing bytes", ErrNonCanonical)
	}
	if err := checkValue(v); err != nil {
		return err
	}
	again, err := encMode.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNonCanonical, err)
	}
	if !bytes.Equal(again, b) {
		return ErrNonCanonical
	}
	return nil
}

func checkValue(v any) error {
	switch x := v.(type) {
	case nil, bool, string, []byte, uint64, int64:
		return nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%w: NaN or infinity", ErrNonCanonical)
		}
		return nil
	case []any:
		for _, e := range x {
			if err := checkValue(e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, e := range x {
			if err := checkValue(e); err != nil {
				return err
			}
		}
		return nil
	case cbor.Tag:
		if x.Number != tagLink {
			return fmt.Errorf("%w: tag %d", ErrNonCanonical, x.Number)
		}
		raw, ok := x.Content.([]byte)
		if !ok || len(raw) < 2 || raw[0] != 0 {
			return fmt.Errorf("%w: malformed link", ErrNonCanonical)
		}
		if _, err := cid.Cast(raw[1:]); err != nil {
			return fmt.Errorf("%w: malformed link: %v", ErrNonCanonical, err)
		}
		return nil
	default:
		// big integers, simple values other than true/false/null, undefined …
		return fmt.Errorf("%w: value of type %T", ErrNonCanonical, v)
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
