// Package reccache keeps JSON projection records decoded beside the store,
// for the services whose committer reads and rewrites the same hot records
// on every write (Parley's threads and boards).
//
// A read still asks the transaction for the record's bytes and uses the
// decoded value only when they are the very bytes it was kept with: the
// value is then what those bytes decode to, whatever the transaction saw
// (an earlier op's uncommitted write, the committed state after a failed
// op dropped its own, a rebuild). So a cache needs no hook into the
// store's commits and failures; a miss decodes, as without it.
package reccache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"relay/store"
)

// ErrMismatch is a kept value that differs from what its bytes decode to:
// the cache would have served a wrong value (only Verify finds it).
var ErrMismatch = errors.New("reccache: kept record differs from its bytes")

// Cache keeps records of type T by key. The zero value is usable and
// unbounded; set Max to bound it.
type Cache[T any] struct {
	// Max is how many records stay decoded; past it, one is dropped (any
	// one: a miss only costs a decode). 0: no bound.
	Max int
	// Clone makes a copy its taker may change without touching the cache.
	// Nil: values are shared, and a taker must copy what it changes.
	Clone func(T) T
	// Verify checks every hit against a fresh decode of its bytes (tests).
	Verify bool

	mu sync.Mutex
	m  map[string]entry[T]
}

type entry[T any] struct {
	raw []byte
	v   T
}

// Get reads the record at key through tx into *v, which must be the zero
// value; found is false when there is none. A hit costs no copy of the
// record's bytes: they are only compared with the kept ones.
func (c *Cache[T]) Get(tx *store.Tx, key []byte, v *T) (found bool, err error) {
	err = tx.Peek(key, func(raw []byte) error {
		found = true
		c.mu.Lock()
		e, ok := c.m[string(key)]
		c.mu.Unlock()
		if ok && bytes.Equal(e.raw, raw) {
			if c.Verify {
				var d T
				if err := json.Unmarshal(raw, &d); err != nil || !reflect.DeepEqual(d, e.v) {
					return fmt.Errorf("%w: %q: %+v, decoded %+v", ErrMismatch, key, e.v, d)
				}
			}
			*v = c.clone(e.v)
			return nil
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return err
		}
		c.Keep(key, bytes.Clone(raw), *v) // raw is the store's: keep a copy
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return found, err
}

// Keep keeps v as what raw, the bytes at key, decode to. raw must not
// change afterwards.
func (c *Cache[T]) Keep(key, raw []byte, v T) {
	v = c.clone(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]entry[T])
	}
	if _, ok := c.m[string(key)]; !ok && c.Max > 0 && len(c.m) >= c.Max {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[string(key)] = entry[T]{raw: raw, v: v}
}

// Len is how many records are kept.
func (c *Cache[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func (c *Cache[T]) clone(v T) T {
	if c.Clone == nil {
		return v
	}
	return c.Clone(v)
}
