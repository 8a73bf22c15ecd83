package fairqueue

import "time"

// The queue's inner workings, all under Queue.mu unless said otherwise: the
// ring of clusters taking turns, the items waiting for their time, the
// entries in processing, and the queue's two goroutines.

// stopProcessing takes e out of q.processing.
func (q *Queue[T]) stopProcessing(e *entry[T]) {
	last := len(q.processing) - 1
	if moved := q.processing[last]; e.index != last {
		q.processing[e.index], moved.index = moved, e.index
	}
	q.processing[last] = nil
	q.processing = q.processing[:last]
	e.index = -1
}

// now is the monotonic time since the queue was made, in nanoseconds: it
// keeps entries smaller than a time.Time would.
func (q *Queue[T]) now() int64 { return int64(time.Since(q.epoch)) }

func (q *Queue[T]) nextSeq() uint64 {
	q.seq++
	return q.seq
}

func (q *Queue[T]) clusterFor(name string) *cluster[T] {
	c, ok := q.clusters[name]
	if !ok {
		c = &cluster[T]{name: name, ready: entryHeap[T]{key: readyKey[T]}}
		q.clusters[name] = c
		q.clusterPk = max(q.clusterPk, len(q.clusters))
	}
	return c
}

// dropIfIdle forgets a cluster that holds nothing, so that a fleet's churn
// leaves nothing behind.
func (q *Queue[T]) dropIfIdle(c *cluster[T]) {
	if c.entries == 0 && c.inflight == 0 && !c.inRing && !c.paused {
		delete(q.clusters, c.name)
		q.clusters = compacted(q.clusters, &q.clusterPk)
	}
}

// compactBelow is the size under which a map is never remade: the memory a
// small map keeps is not worth the copy.
const compactBelow = 1024

// compacted returns m, or a copy sized for what it holds once it holds an
// eighth of its peak or less; peak is the most m held since it was made. A
// Go map keeps the memory of its largest size when its entries are deleted:
// a fleet of 1,000 clusters syncing 250 objects each queues up to a quarter
// of a million requests, and the drained map kept about 18 MB of them.
// A copy of n entries follows at least 7n deletions since the last one, so
// deleting costs O(1) amortized.
func compacted[K comparable, V any](m map[K]V, peak *int) map[K]V {
	n := len(m)
	if *peak < compactBelow || n > *peak/8 {
		return m
	}
	c := make(map[K]V, n)
	for k, v := range m {
		c[k] = v
	}
	*peak = n
	return c
}

// makeReady puts e in its cluster's ready heap, or parks it while the same
// item is processing. It reports whether e is ready: the caller then calls
// readied once it has released the lock.
func (q *Queue[T]) makeReady(e *entry[T], now int64) bool {
	q.ready++
	if e.s.busy != nil {
		e.state = stateParked
		return false
	}
	e.state, e.at = stateReady, now
	e.c.ready.push(e)
	if !e.c.inRing && !e.c.paused {
		q.link(e.c)
	}
	return true
}

// readied counts n entries made ready and wakes as many waiting workers; it
// is called without the lock, so that a worker woken does not wait at once
// for the lock its waker holds.
func (q *Queue[T]) readied(n int) {
	for range n {
		q.metrics.add()
		q.cond.Signal()
	}
}

// pick takes the next item in turn, or nil when no cluster may be served.
// Clusters at their cap are passed over; there are at most as many of those
// as items in processing.
func (q *Queue[T]) pick() *entry[T] {
	for range q.ringLen {
		c := q.cur
		if q.opts.MaxInFlightPerCluster > 0 && c.inflight >= q.opts.MaxInFlightPerCluster {
			q.advance()
			continue
		}
		e := c.ready.pop()
		q.credit--
		if c.ready.Len() == 0 {
			q.unlink(c)
		} else if q.credit <= 0 {
			q.advance()
		}
		return e
	}
	return nil
}

// link adds c to the ring, last in turn.
func (q *Queue[T]) link(c *cluster[T]) {
	c.inRing = true
	q.ringLen++
	if q.cur == nil {
		c.prev, c.next = c, c
		q.cur = c
		q.credit = q.weight(c)
		return
	}
	c.prev, c.next = q.cur.prev, q.cur
	q.cur.prev.next = c
	q.cur.prev = c
}

func (q *Queue[T]) unlink(c *cluster[T]) {
	c.inRing = false
	q.ringLen--
	if q.ringLen == 0 {
		q.cur = nil
	} else {
		c.prev.next, c.next.prev = c.next, c.prev
		if q.cur == c {
			q.cur = c.next
			q.credit = q.weight(q.cur)
		}
	}
	c.prev, c.next = nil, nil
}

func (q *Queue[T]) advance() {
	q.cur = q.cur.next
	q.credit = q.weight(q.cur)
}

func (q *Queue[T]) weight(c *cluster[T]) int {
	if q.opts.Weight == nil {
		return 1
	}
	return max(1, q.opts.Weight(c.name))
}

func (q *Queue[T]) pushWaiting(e *entry[T], at int64) {
	e.state, e.at = stateWaiting, at
	q.waiting.push(e)
	if e.index == 0 {
		q.notifyWaiting()
	}
}

func (q *Queue[T]) notifyWaiting() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// waitLoop makes waiting items ready when their time comes.
func (q *Queue[T]) waitLoop() {
	defer q.stopped.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		q.mu.Lock()
		now := q.now()
		readied := 0
		for q.waiting.Len() > 0 && q.waiting.peek().at <= now {
			e := q.waiting.pop()
			if q.makeReady(e, now) {
				readied++
			}
		}
		next := time.Hour
		if q.waiting.Len() > 0 {
			next = time.Duration(q.waiting.peek().at - now)
		}
		q.mu.Unlock()
		q.readied(readied)
		timer.Reset(next)
		select {
		case <-q.done:
			return
		case <-q.wake:
		case <-timer.C:
		}
	}
}

// metricsLoop reports the age of the work in processing, as client-go's
// queue does.
func (q *Queue[T]) metricsLoop() {
	defer q.stopped.Done()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-q.done:
			return
		case <-t.C:
		}
		q.mu.Lock()
		q.metrics.updateUnfinished(q.processing, q.now())
		q.mu.Unlock()
	}
}
