package fairqueue

import (
	"cmp"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
)

// TestEntryHeapInvariants runs random pushes, pops, key changes and removals
// on a heap and checks after each step that every entry knows its index,
// that the heap property holds, and that pops come in key order. A failing
// seed is printed; FAIRQUEUE_HEAP_SEED=N reruns it alone.
func TestEntryHeapInvariants(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	if s := os.Getenv("FAIRQUEUE_HEAP_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{n}
	}
	for _, seed := range seeds {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			for _, key := range []func(*entry[int]) (int64, uint64){readyKey[int], waitKey[int]} {
				checkHeap(t, seed, key)
			}
		})
	}
}

func checkHeap(t *testing.T, seed uint64, key func(*entry[int]) (int64, uint64)) {
	rng := rand.New(rand.NewPCG(seed, seed))
	h := entryHeap[int]{key: key}
	var in []*entry[int] // the entries in h
	var seq uint64
	fail := func(step int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (rerun: FAIRQUEUE_HEAP_SEED=%d), step %d: "+format, append([]any{seed, seed, step}, args...)...)
	}
	compare := func(a, b *entry[int]) int {
		a1, a2 := key(a)
		b1, b2 := key(b)
		return cmp.Or(cmp.Compare(a1, b1), cmp.Compare(a2, b2))
	}
	for step := range 3000 {
		switch op := rng.IntN(10); {
		case op < 4 || len(in) == 0: // push
			seq++
			e := &entry[int]{key: int(seq), seq: seq, priority: rng.IntN(5) - 2, at: int64(rng.IntN(100)), index: -1}
			h.push(e)
			in = append(in, e)
		case op < 7: // pop: the least key
			want := slices.MinFunc(in, compare)
			got := h.pop()
			if got != want {
				fail(step, "popped %d, want %d", got.key, want.key)
			}
			if got.index != -1 {
				fail(step, "popped entry keeps index %d", got.index)
			}
			in = slices.DeleteFunc(in, func(e *entry[int]) bool { return e == got })
		case op < 9: // change a key and fix
			e := in[rng.IntN(len(in))]
			seq++
			e.priority, e.seq, e.at = rng.IntN(5)-2, seq, int64(rng.IntN(100))
			h.fix(e)
		default: // remove any
			e := in[rng.IntN(len(in))]
			h.remove(e)
			if e.index != -1 {
				fail(step, "removed entry keeps index %d", e.index)
			}
			in = slices.DeleteFunc(in, func(x *entry[int]) bool { return x == e })
		}
		if h.Len() != len(in) {
			fail(step, "heap holds %d entries, want %d", h.Len(), len(in))
		}
		for i, it := range h.items {
			if it.e.index != i {
				fail(step, "entry %d at %d thinks it is at %d", it.e.key, i, it.e.index)
			}
			if k1, k2 := key(it.e); k1 != it.k1 || k2 != it.k2 {
				fail(step, "entry %d carries a stale key", it.e.key)
			}
			if i > 0 && it.less(h.items[(i-1)/arity]) {
				fail(step, "entry %d at %d sorts before its parent", it.e.key, i)
			}
		}
	}
}
