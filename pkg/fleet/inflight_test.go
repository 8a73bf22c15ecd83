package fleet

import (
	"sync"
	"testing"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestHoldInflightCount: a drain's wait ends when the last hold is released,
// not before; releasing a hold twice counts once.
func TestHoldInflightCount(t *testing.T) {
	in := &instance{}
	if !closed(in.inflight.wait()) {
		t.Fatal("wait with nothing in flight is not done")
	}
	in.inflight.add()
	a := &hold{in: in}
	in.inflight.add()
	b := &hold{in: in}
	idle := in.inflight.wait()
	a.release()
	a.release() // a second call must not count as b's
	if closed(idle) {
		t.Fatal("wait ended while a hold is still in flight (a released twice)")
	}
	if n := in.inflight.n.Load(); n != 1 {
		t.Fatalf("in flight = %d after releasing one of two holds twice, want 1", n)
	}
	b.release()
	if !closed(idle) {
		t.Fatal("wait did not end when the last hold was released")
	}
	if n := in.inflight.n.Load(); n != 0 {
		t.Fatalf("in flight = %d after releasing every hold, want 0", n)
	}
}

// TestHoldInflightConcurrent: holds taken and released by many workers at
// once, each released twice, while drains wait: every wait ends once the
// workers are done and the count is zero (run with -race).
func TestHoldInflightConcurrent(t *testing.T) {
	in := &instance{}
	const workers, holds = 8, 2000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range holds {
				in.inflight.add()
				h := &hold{in: in}
				h.release()
				h.release()
			}
		})
	}
	var waits []<-chan struct{}
	for range 100 {
		waits = append(waits, in.inflight.wait())
	}
	wg.Wait()
	if n := in.inflight.n.Load(); n != 0 {
		t.Fatalf("in flight = %d after every hold was released, want 0", n)
	}
	for i, w := range waits {
		if !closed(w) {
			t.Fatalf("wait %d did not end although nothing is in flight", i)
		}
	}
}
