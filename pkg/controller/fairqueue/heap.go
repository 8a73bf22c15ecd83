package fairqueue

// entryHeap is a 4-ary min-heap of entries, used for a cluster's ready
// entries and for the entries waiting for their time. It keeps each entry's
// index current, so that fix and remove find an entry without a search.
//
// Each element carries its entry's sort key beside the pointer: sifting
// compares keys in the heap's own array and touches an entry only to note
// its new index. container/heap would call Less and Swap through an
// interface and load both entries for every comparison, all of it under the
// queue's lock, on every Get. Four children per node halve the depth of a
// binary heap, and siblings share cache lines: a cluster's backlog of
// thousands of requests is sifted with about half the cache misses.
type entryHeap[T comparable] struct {
	items []heapItem[T]
	key   func(*entry[T]) (int64, uint64)
}

// arity is the number of children of a node.
const arity = 4

type heapItem[T comparable] struct {
	k1 int64
	k2 uint64
	e  *entry[T]
}

func (a heapItem[T]) less(b heapItem[T]) bool {
	return a.k1 < b.k1 || (a.k1 == b.k1 && a.k2 < b.k2)
}

// readyKey orders a cluster's ready entries: higher priority first, then
// first added.
func readyKey[T comparable](e *entry[T]) (int64, uint64) { return ^int64(e.priority), e.seq }

// waitKey orders the entries added with a delay by the time they are due.
func waitKey[T comparable](e *entry[T]) (int64, uint64) { return e.at, e.seq }

func (h *entryHeap[T]) Len() int { return len(h.items) }

// peek returns the first entry; the heap must not be empty.
func (h *entryHeap[T]) peek() *entry[T] { return h.items[0].e }

func (h *entryHeap[T]) item(e *entry[T]) heapItem[T] {
	k1, k2 := h.key(e)
	return heapItem[T]{k1: k1, k2: k2, e: e}
}

func (h *entryHeap[T]) push(e *entry[T]) {
	h.items = append(h.items, h.item(e))
	h.up(len(h.items) - 1)
}

// pop removes and returns the first entry; the heap must not be empty.
func (h *entryHeap[T]) pop() *entry[T] {
	e := h.items[0].e
	h.removeAt(0)
	return e
}

// remove takes e out of the heap.
func (h *entryHeap[T]) remove(e *entry[T]) { h.removeAt(e.index) }

// fix restores the order after e's key changed.
func (h *entryHeap[T]) fix(e *entry[T]) {
	i := e.index
	h.items[i] = h.item(e)
	if !h.up(i) {
		h.down(i)
	}
}

func (h *entryHeap[T]) removeAt(i int) {
	e := h.items[i].e
	last := len(h.items) - 1
	if i != last {
		h.items[i] = h.items[last]
		h.items[i].e.index = i
	}
	h.items[last] = heapItem[T]{}
	h.items = h.items[:last]
	if i != last && !h.up(i) {
		h.down(i)
	}
	e.index = -1
	// A cluster's backlog drained: do not keep its largest array.
	if last == 0 && cap(h.items) > 64 {
		h.items = nil
	}
}

// up moves the element at i towards the root; it reports whether it moved.
func (h *entryHeap[T]) up(i int) bool {
	it := h.items[i]
	start := i
	for i > 0 {
		p := (i - 1) / arity
		if !it.less(h.items[p]) {
			break
		}
		h.items[i] = h.items[p]
		h.items[i].e.index = i
		i = p
	}
	h.items[i] = it
	it.e.index = i
	return i != start
}

func (h *entryHeap[T]) down(i int) {
	n := len(h.items)
	it := h.items[i]
	for {
		first := arity*i + 1
		if first >= n {
			break
		}
		c := first
		for j := first + 1; j < min(first+arity, n); j++ {
			if h.items[j].less(h.items[c]) {
				c = j
			}
		}
		if !h.items[c].less(it) {
			break
		}
		h.items[i] = h.items[c]
		h.items[i].e.index = i
		i = c
	}
	h.items[i] = it
	it.e.index = i
}
