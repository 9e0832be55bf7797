package corpus

import (
	"hash/maphash"
	"sync"

	"relay/store"
)

// opFilter knows which idempotency records may exist, so that a write
// with a fresh Operation-Token (nearly every write) need not look its
// record up in Badger on the committer: a lookup that misses walks every
// memtable and level of the LSM tree. It is a Bloom filter over the
// records' keys: "no" is certain, "maybe" is looked up as before.
//
// Every key the store holds is in it: New adds the stored ones, and a
// write adds its key in the op that writes the record, before the
// record can be read. An op that fails leaves its key behind, which only
// costs a lookup. It grows by adding filters twice the size of the last
// once one is full (a scalable Bloom filter), so its false positives stay
// near 1 % however many records come.
type opFilter struct {
	mu    sync.Mutex
	seed  maphash.Seed
	parts []*bloom // the last one takes new keys
}

// bloom is one filter of opFilter: m bits, opHashes probes per key,
// meant for max keys.
type bloom struct {
	bits   []uint64
	m      uint64
	n, max int
}

const (
	opBitsPerKey = 10 // with opHashes, about 1 % false positives when full
	opHashes     = 7
	opMinKeys    = 1 << 16
)

func newOpFilter(keys int) *opFilter {
	return &opFilter{seed: maphash.MakeSeed(), parts: []*bloom{newBloom(max(opMinKeys, 2*keys))}}
}

func newBloom(keys int) *bloom {
	words := (keys*opBitsPerKey + 63) / 64
	return &bloom{bits: make([]uint64, words), m: uint64(words) * 64, max: keys}
}

// loadOpFilter builds the filter of the records st holds.
func loadOpFilter(st *store.Store) (*opFilter, error) {
	var keys [][]byte
	err := st.View(func(tx *store.Tx) error {
		return tx.Iterate(pfxOpToken, false, func(k, _ []byte) error {
			keys = append(keys, k)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	f := newOpFilter(len(keys))
	for _, k := range keys {
		f.add(k)
	}
	return f, nil
}

// probes returns the two hashes the probes of key derive from.
func (f *opFilter) probes(key []byte) (h1, h2 uint64) {
	h := maphash.Bytes(f.seed, key)
	return h, h>>32 | h<<32 | 1
}

// add records that key may hold a record.
func (f *opFilter) add(key []byte) {
	h1, h2 := f.probes(key)
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.parts[len(f.parts)-1]
	if b.n >= b.max {
		b = newBloom(2 * b.max)
		f.parts = append(f.parts, b)
	}
	for i := range uint64(opHashes) {
		j := (h1 + i*h2) % b.m
		b.bits[j/64] |= 1 << (j % 64)
	}
	b.n++
}

// mayHave is false when key certainly holds no record.
func (f *opFilter) mayHave(key []byte) bool {
	h1, h2 := f.probes(key)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.parts {
		if b.has(h1, h2) {
			return true
		}
	}
	return false
}

func (b *bloom) has(h1, h2 uint64) bool {
	for i := range uint64(opHashes) {
		j := (h1 + i*h2) % b.m
		if b.bits[j/64]&(1<<(j%64)) == 0 {
			return false
		}
	}
	return true
}
