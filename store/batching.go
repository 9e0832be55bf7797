package store

import (
	"sync/atomic"
	"time"
)

// batching is the writer's wait for a batch worth a sync.
//
// Under a crowd of clients that each wait for their ack before they write
// again, batches fall into a convoy. The writer acks a large batch, takes
// the first op to come back alone and pays a whole sync for it while the
// others pile up behind it; then the same again. During posts from 32
// agents over HTTP, 2,722 batches held one post and 637 held 31 in one run.
// So after a batch of at least lingerSiblings ops, the writer waits until
// the committer's next batch holds half as many, for at most half as long
// as that batch took (and never more than lingerMax). The same run then
// made 631 batches of one and 164 of 31, most of them between 8 and 16.
// PostgreSQL's commit_delay and commit_siblings are the same idea.
//
// A lone writer never waits (its batches hold one op), and neither does a
// crowd whose ops the committer has run already: the batch is half full
// when the writer is free.
type batching struct {
	cur    atomic.Int64 // ops in the committer's current batch
	target atomic.Int64 // what the writer waits for; 0 while it does not
	enough chan struct{}
	woken  atomic.Uint64 // waits the committer ended, for tests
}

const lingerSiblings = 4

// lingerMax bounds a wait, so that a batch slowed by a stall (Badger
// starting a memtable) does not hold the next one as long.
var lingerMax = time.Millisecond

func newBatching() *batching { return &batching{enough: make(chan struct{}, 1)} }

// added records, on the committer, that the current batch holds n ops (0:
// handed off), and wakes the writer once it holds what the writer waits for.
func (bt *batching) added(n int) {
	bt.cur.Store(int64(n))
	if t := bt.target.Load(); t > 0 && int64(n) >= t {
		select {
		case bt.enough <- struct{}{}:
		default:
		}
	}
}

// linger waits, on the writer, after a batch of prev ops whose commit took
// d.
func (bt *batching) linger(prev int, d time.Duration) {
	want := int64(prev / 2)
	if prev < lingerSiblings || bt.cur.Load() >= want {
		return
	}
	select { // a wake-up left over from an earlier wait
	case <-bt.enough:
	default:
	}
	bt.target.Store(want)
	defer bt.target.Store(0)
	if bt.cur.Load() >= want { // reached before the target was set
		return
	}
	t := time.NewTimer(min(d/2, lingerMax))
	defer t.Stop()
	select {
	case <-bt.enough:
		bt.woken.Add(1)
	case <-t.C:
	}
}
