package fairqueue

// entries is the storage of both heaps: it keeps every entry's index current,
// so that heap.Fix and heap.Remove find an entry without a search.
type entries[T comparable] []*entry[T]

func (h entries[T]) Len() int { return len(h) }
func (h entries[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entries[T]) Push(x any) {
	e := x.(*entry[T])
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entries[T]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

// readyHeap orders a cluster's ready entries: higher priority first, then
// first added.
type readyHeap[T comparable] struct{ entries[T] }

func (h readyHeap[T]) Less(i, j int) bool {
	a, b := h.entries[i], h.entries[j]
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return a.seq < b.seq
}

// waitHeap orders the entries added with a delay by the time they are due.
type waitHeap[T comparable] struct{ entries[T] }

func (h waitHeap[T]) Less(i, j int) bool { return h.entries[i].at < h.entries[j].at }
