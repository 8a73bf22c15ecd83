package fleet

import (
	"container/heap"
	"sync"
	"time"
)

// probeQueue holds the probes to come, earliest first, so that each round of
// the scheduler looks at the probes that are due and at nothing else: with
// 10,000 clusters probed every 10s, a round touches about a thousand records,
// not ten thousand, and never under the engine's exclusive lock.
//
// Every change of a record's nextProbe goes through schedule, which pushes an
// entry; an entry whose time is no longer its record's nextProbe is stale and
// dropped when it comes up. A record therefore has exactly one live entry
// while it has a next probe.
type probeQueue struct {
	mu sync.Mutex // guards the heap and every record's nextProbe and probing
	h  probeHeap
	// off: probing is disabled, and nothing would ever take an entry (each
	// would keep its record, forgotten or not, for the engine's life).
	off bool
}

type probeEntry struct {
	at  time.Time
	rec *record
}

type probeHeap []probeEntry

func (h probeHeap) Len() int           { return len(h) }
func (h probeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h probeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *probeHeap) Push(x any)        { *h = append(*h, x.(probeEntry)) }
func (h *probeHeap) Pop() any {
	old := *h
	n := len(old) - 1
	x := old[n]
	old[n] = probeEntry{}
	*h = old[:n]
	return x
}

// scheduleLocked sets rec's next probe; under q.mu.
func (q *probeQueue) scheduleLocked(rec *record, at time.Time) {
	if q.off {
		return
	}
	rec.nextProbe = at
	heap.Push(&q.h, probeEntry{at: at, rec: rec})
}

// schedule sets rec's next probe.
func (q *probeQueue) schedule(rec *record, at time.Time) {
	q.mu.Lock()
	q.scheduleLocked(rec, at)
	q.mu.Unlock()
}

// dueLocked pops the records whose probe is due at now and calls take for
// each. A record take neither probes nor schedules again (it is not engaged
// or disconnected any more) leaves the queue until the engine schedules it.
// Under q.mu.
func (q *probeQueue) dueLocked(now time.Time, take func(*record)) {
	for len(q.h) > 0 && !q.h[0].at.After(now) {
		ent := heap.Pop(&q.h).(probeEntry)
		if !ent.at.Equal(ent.rec.nextProbe) {
			continue // rescheduled since: a later entry is live
		}
		ent.rec.nextProbe = time.Time{}
		take(ent.rec)
	}
}
