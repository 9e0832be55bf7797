package corpus

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"relay/store"
)

// An author's statistics are rewritten by every message the author
// writes, so they are stored compactly, in binary, rather than as JSON
// (about 90 bytes instead of 440): authorFormat, then varints in the
// order of appendAuthor. Records stored as JSON by earlier versions are
// read as before, and replaced by the binary form at the author's next
// message.
const authorFormat = 1

var errAuthorRecord = errors.New("corpus: malformed author record")

// encodeAuthor is a's stored form; its kinds in name order, so that equal
// statistics are equal bytes.
func encodeAuthor(a *authorRec) []byte {
	b := make([]byte, 0, 96+8*len(a.Kinds))
	b = append(b, authorFormat)
	b = binary.AppendVarint(b, int64(a.Messages))
	b = binary.AppendVarint(b, int64(a.Conversations))
	b = binary.AppendUvarint(b, a.FirstSequence)
	b = binary.AppendUvarint(b, a.LastSequence)
	b = appendTimeBin(b, a.FirstActive)
	b = appendTimeBin(b, a.LastActive)
	for _, n := range a.Hours {
		b = binary.AppendVarint(b, int64(n))
	}
	for _, n := range a.Weekdays {
		b = binary.AppendVarint(b, int64(n))
	}
	kinds := make([]string, 0, len(a.Kinds))
	for k := range a.Kinds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	b = binary.AppendUvarint(b, uint64(len(kinds)))
	for _, k := range kinds {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendVarint(b, int64(a.Kinds[k]))
	}
	return b
}

// appendTimeBin writes t as Unix milliseconds and the nanoseconds past
// them (0 for the millisecond times of events).
func appendTimeBin(b []byte, t time.Time) []byte {
	ms := t.UnixMilli()
	b = binary.AppendVarint(b, ms)
	return binary.AppendVarint(b, t.Sub(time.UnixMilli(ms)).Nanoseconds())
}

// decodeAuthor reads the stored statistics of authorID, binary or JSON;
// Kinds is never nil.
func decodeAuthor(authorID string, raw []byte) (authorRec, error) {
	a := authorRec{AuthorID: authorID, Kinds: map[string]int{}}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &a); err != nil {
			return a, err
		}
		if a.Kinds == nil {
			a.Kinds = map[string]int{}
		}
		return a, nil
	}
	if len(raw) == 0 || raw[0] != authorFormat {
		return a, errAuthorRecord
	}
	r := recReader{b: raw[1:], bad: errAuthorRecord}
	a.Messages = int(r.varint())
	a.Conversations = int(r.varint())
	a.FirstSequence = r.uvarint()
	a.LastSequence = r.uvarint()
	a.FirstActive = r.time()
	a.LastActive = r.time()
	for i := range a.Hours {
		a.Hours[i] = int(r.varint())
	}
	for i := range a.Weekdays {
		a.Weekdays[i] = int(r.varint())
	}
	n := r.uvarint()
	for i := uint64(0); i < n && r.err == nil; i++ {
		l := r.uvarint()
		if l > uint64(len(r.b)) {
			r.err = errAuthorRecord
			break
		}
		k := string(r.b[:l])
		r.b = r.b[l:]
		a.Kinds[k] = int(r.varint())
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errAuthorRecord
	}
	return a, r.err
}

// recReader reads the binary records of authors and conversations: varints,
// times and length-prefixed strings, keeping the first error, bad.
type recReader struct {
	b   []byte
	bad error
	err error
}

func (r *recReader) varint() int64 {
	v, n := binary.Varint(r.b)
	r.skip(n)
	return v
}

func (r *recReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	r.skip(n)
	return v
}

// skip moves past a varint of n bytes; n <= 0 (binary's word for none or
// an overflow) makes the record bad. A bad record reads as zeros.
func (r *recReader) skip(n int) {
	if n <= 0 {
		r.err, r.b = r.bad, nil
		return
	}
	r.b = r.b[n:]
}

func (r *recReader) str() string {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err, r.b = r.bad, nil
	}
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *recReader) time() time.Time {
	ms := r.varint()
	ns := r.varint()
	return time.UnixMilli(ms).Add(time.Duration(ns)).UTC()
}

// readAuthor reads authorID's statistics; active is false (and the counts
// zero) when the author has written nothing here.
func readAuthor(tx *store.Tx, authorID string) (a authorRec, active bool, err error) {
	raw, err := tx.Get(cat(pfxAuthor, []byte(authorID)))
	if errors.Is(err, store.ErrNotFound) {
		return authorRec{AuthorID: authorID, Kinds: map[string]int{}}, false, nil
	}
	if err != nil {
		return a, false, err
	}
	a, err = decodeAuthor(authorID, raw)
	return a, true, err
}
