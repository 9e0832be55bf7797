package api

// admitsJSON reports whether the raw arguments b certainly pass both
// checks validate makes of them after its first: that encoding/json decodes
// them, as one JSON object, into an any, and that the shape admits what it
// decodes. It reads b once and allocates nothing, where the decode builds
// a map and a string for every field.
//
// It answers yes only for what it reads as encoding/json does, and no to
// everything else — keys with escapes or bytes beyond ASCII, numbers with
// a fraction, an exponent or more than 15 digits, nesting deeper than
// maxScanDepth — which then takes the decode: a no is never a refusal.
// Duplicate keys pass only if every occurrence passes, so whichever one the
// decode keeps, the shape admits it.
func (sh *shape) admitsJSON(b []byte) bool {
	ok, _ := sh.scanJSON(b)
	return ok
}

// scanJSON is admitsJSON; numbers also says whether b holds a number.
func (sh *shape) scanJSON(b []byte) (ok, numbers bool) {
	sc := scan{b: b}
	sc.space()
	if sc.i == len(sc.b) || sc.b[sc.i] != '{' || !sc.value(sh, 0) {
		return false, sc.numbers
	}
	sc.space()
	return sc.i == len(sc.b), sc.numbers
}

// maxScanDepth bounds the scan's recursion; encoding/json allows 10,000.
const maxScanDepth = 64

// maxScanKeys bounds the members of an object the scan reads.
const maxScanKeys = 32

// scan is a read of raw arguments; a nil shape admits any value.
type scan struct {
	b       []byte
	i       int
	numbers bool // a number was read
}

func (sc *scan) space() {
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// is reports whether the shape sh admits type t.
func is(sh *shape, t jsonType) bool { return sh == nil || !sh.typed || sh.types&t != 0 }

func (sc *scan) value(sh *shape, depth int) bool {
	if sc.i >= len(sc.b) {
		return false
	}
	if sh != nil && sh.enum != nil && sc.b[sc.i] != '"' {
		return false // an enum admits strings alone
	}
	switch c := sc.b[sc.i]; {
	case c == '{':
		return is(sh, typeObject) && depth < maxScanDepth && sc.object(sh, depth+1)
	case c == '[':
		return is(sh, typeArray) && depth < maxScanDepth && sc.array(sh, depth+1)
	case c == '"':
		return is(sh, typeString) && sc.str(sh)
	case c == 't':
		return is(sh, typeBoolean) && sc.literal("true")
	case c == 'f':
		return is(sh, typeBoolean) && sc.literal("false")
	case c == 'n':
		return is(sh, typeNull) && sc.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return sc.integer(sh)
	}
	return false
}

func (sc *scan) literal(lit string) bool {
	if len(sc.b)-sc.i < len(lit) || string(sc.b[sc.i:sc.i+len(lit)]) != lit {
		return false
	}
	sc.i += len(lit)
	return true
}

// integer reads a number with no fraction or exponent and at most 15
// digits, which a float64 holds exactly: anything else is left to the
// decode. What follows it is the caller's to check, so "01" and "1x" fail
// there.
func (sc *scan) integer(sh *shape) bool {
	sc.numbers = true
	neg := sc.b[sc.i] == '-'
	if neg {
		sc.i++
	}
	start := sc.i
	var n int64
	for sc.i < len(sc.b) && '0' <= sc.b[sc.i] && sc.b[sc.i] <= '9' {
		n = n*10 + int64(sc.b[sc.i]-'0')
		sc.i++
	}
	digits := sc.i - start
	if digits == 0 || digits > 15 || digits > 1 && sc.b[start] == '0' {
		return false
	}
	if sc.i < len(sc.b) {
		if c := sc.b[sc.i]; c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	if !is(sh, typeInteger) {
		return false
	}
	if sh == nil {
		return true
	}
	if neg {
		n = -n
	}
	return sh.admits(float64(n))
}

// str reads a string as encoding/json's scanner does: no control
// characters, only JSON's escapes; bytes that are not UTF-8 are decoded
// (to U+FFFD), not refused. Of a least length it checks only that a string
// is not empty, which every character or escape makes it; a longer least
// length takes the decode.
func (sc *scan) str(sh *shape) bool {
	sc.i++ // the opening quote
	start := sc.i
	escaped := false
	for sc.i < len(sc.b) {
		c := sc.b[sc.i]
		switch {
		case c == '"':
			sc.i++
			if sh != nil && sh.enum != nil {
				// Only a string written without escapes is compared here.
				return !escaped && sh.enum[string(sc.b[start:sc.i-1])]
			}
			if sh != nil && sh.minLength > 0 {
				return sh.minLength == 1 && sc.i-1 > start
			}
			return true
		case c < 0x20:
			return false
		case c == '\\':
			escaped = true
			if sc.i+1 >= len(sc.b) {
				return false
			}
			switch sc.b[sc.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				sc.i += 2
			case 'u':
				if len(sc.b)-sc.i < 6 {
					return false
				}
				for _, h := range sc.b[sc.i+2 : sc.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				sc.i += 6
			default:
				return false
			}
		default:
			sc.i++
		}
	}
	return false
}

// key reads an object's key that needs no decoding: printable ASCII
// without escapes.
func (sc *scan) key() ([]byte, bool) {
	sc.i++ // the opening quote
	start := sc.i
	for sc.i < len(sc.b) {
		c := sc.b[sc.i]
		switch {
		case c == '"':
			sc.i++
			return sc.b[start : sc.i-1], true
		case c < 0x20 || c == '\\' || c >= 0x80:
			return nil, false
		}
		sc.i++
	}
	return nil, false
}

func (sc *scan) object(sh *shape, depth int) bool {
	sc.i++ // {
	sc.space()
	if sc.i < len(sc.b) && sc.b[sc.i] == '}' {
		sc.i++
		return sh == nil || sh.requiredAll == 0
	}
	var seen uint64
	// The keys read so far, to answer no to one named twice: the decode
	// path refuses it. An object of more keys than this is left to it too.
	var keys [maxScanKeys][]byte
	nkeys := 0
	for {
		if sc.i >= len(sc.b) || sc.b[sc.i] != '"' {
			return false
		}
		k, ok := sc.key()
		if !ok || nkeys == maxScanKeys {
			return false
		}
		for _, o := range keys[:nkeys] {
			if string(o) == string(k) {
				return false
			}
		}
		keys[nkeys] = k
		nkeys++
		sc.space()
		if sc.i >= len(sc.b) || sc.b[sc.i] != ':' {
			return false
		}
		sc.i++
		sc.space()
		var sub *shape
		if sh != nil {
			if p, ok := sh.props[string(k)]; ok {
				sub = p
			} else if sh.closed {
				return false
			} else {
				sub = sh.extra
			}
			if sh.requiredAll != 0 {
				seen |= sh.requiredBit[string(k)]
			}
		}
		if !sc.value(sub, depth) {
			return false
		}
		if closed, ok := sc.next('}'); !ok || closed {
			return ok && (sh == nil || seen == sh.requiredAll)
		}
	}
}

// next reads what follows a member or an element: a comma (and the space
// after it), or the closing byte; ok is false for anything else.
func (sc *scan) next(closing byte) (closed, ok bool) {
	sc.space()
	if sc.i >= len(sc.b) {
		return false, false
	}
	switch sc.b[sc.i] {
	case ',':
		sc.i++
		sc.space()
		return false, true
	case closing:
		sc.i++
		return true, true
	}
	return false, false
}

func (sc *scan) array(sh *shape, depth int) bool {
	sc.i++ // [
	sc.space()
	if sc.i < len(sc.b) && sc.b[sc.i] == ']' {
		sc.i++
		return true
	}
	var item *shape
	if sh != nil {
		item = sh.items
	}
	for {
		if !sc.value(item, depth) {
			return false
		}
		if closed, ok := sc.next(']'); !ok || closed {
			return ok
		}
	}
}
