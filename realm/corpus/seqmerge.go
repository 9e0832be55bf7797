package corpus

import (
	"bytes"
	"encoding/binary"
	"errors"

	"relay/store"
)

// scanSeqs is scanSeq over several indexes by sequence at once, as over
// their union: fn sees each sequence one of them holds once, in ascending
// order, with the value of the first index that holds it. Each index is
// read ahead in chunks, so a listing that stops after a page reads about
// a page of each.
func scanSeqs(tx *store.Tx, prefixes [][]byte, after, upTo uint64, fn func(seq uint64, val []byte) error) error {
	if len(prefixes) == 1 {
		return scanSeq(tx, prefixes[0], after, upTo, fn)
	}
	if after >= upTo {
		return nil
	}
	cs := make([]seqCursor, len(prefixes))
	for i, p := range prefixes {
		cs[i] = seqCursor{prefix: p, after: after, chunk: 32}
	}
	for {
		var low uint64
		found := false
		for i := range cs {
			c := &cs[i]
			if len(c.buf) == 0 && !c.done {
				if err := c.fill(tx, upTo); err != nil {
					return err
				}
			}
			if len(c.buf) > 0 && (!found || c.buf[0].seq < low) {
				low, found = c.buf[0].seq, true
			}
		}
		if !found {
			return nil
		}
		var val []byte
		for i := range cs {
			c := &cs[i]
			if len(c.buf) > 0 && c.buf[0].seq == low {
				if val == nil {
					val = c.buf[0].val
				}
				c.buf = c.buf[1:]
			}
		}
		if err := fn(low, val); err != nil {
			if errors.Is(err, store.ErrStop) {
				return nil
			}
			return err
		}
	}
}

// seqCursor reads one index of scanSeqs ahead.
type seqCursor struct {
	prefix []byte
	after  uint64 // the last sequence read
	chunk  int    // how many the next fill reads: doubles up to 4,096
	buf    []seqEntry
	done   bool // nothing left up to upTo
}

type seqEntry struct {
	seq uint64
	val []byte
}

func (c *seqCursor) fill(tx *store.Tx, upTo uint64) error {
	c.buf = c.buf[:0]
	if c.after >= upTo {
		c.done = true
		return nil
	}
	from := binary.BigEndian.AppendUint64(bytes.Clone(c.prefix), c.after+1)
	err := tx.IterateFrom(c.prefix, from, func(k, v []byte) error {
		if len(k) != len(c.prefix)+8 {
			return nil // another index under the prefix: none is
		}
		seq := binary.BigEndian.Uint64(k[len(c.prefix):])
		if seq > upTo {
			c.done = true
			return store.ErrStop
		}
		c.buf = append(c.buf, seqEntry{seq, v})
		c.after = seq
		if len(c.buf) == c.chunk {
			return store.ErrStop
		}
		return nil
	})
	if len(c.buf) < c.chunk {
		c.done = true
	}
	c.chunk = min(2*c.chunk, 4096)
	return err
}

// schemaIndexes are the indexes of the messages of each schema some
// message declares (pfxSchMsgs), found by skipping from one schema's
// first key to the next schema's.
func schemaIndexes(tx *store.Tx) ([][]byte, error) {
	var out [][]byte
	from := pfxSchMsgs
	for {
		var name []byte
		err := tx.IterateFrom(pfxSchMsgs, from, func(k, _ []byte) error {
			if i := bytes.IndexByte(k[len(pfxSchMsgs):], 0); i >= 0 {
				name = k[:len(pfxSchMsgs)+i+1]
			}
			return store.ErrStop
		})
		if err != nil || name == nil {
			return out, err
		}
		out = append(out, name)
		// The next schema's keys sort after every key of this one, which
		// continue its name with NUL.
		from = append(bytes.Clone(name[:len(name)-1]), 1)
	}
}
