package fleetreader

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The fleet index under random schedules: each member's events arrive in
// order (as an informer delivers them to one handler) while the members run
// concurrently, some members leave at a random point and lookups run all
// along. Afterwards the index holds exactly the last state of every member
// that stayed and nothing of those that left. A failing seed prints itself;
// FLEETREADER_SEED=<seed> reruns it alone.
func TestIndexInvariantsOverRandomSchedules(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLEETREADER_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 50 {
		if err := indexSchedule(seed + uint64(round)); err != nil {
			t.Fatalf("%v\nrerun alone with FLEETREADER_SEED=%d go test -race -run TestIndexInvariantsOverRandomSchedules ./pkg/fleetreader/", err, seed+uint64(round))
		}
	}
}

func indexSchedule(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0))
	idx := &index{
		extract:  func(o client.Object) []string { return []string{o.(*corev1.ConfigMap).Data["owner"]} },
		byValue:  map[string]map[ref]client.Object{},
		byMember: map[*member]map[string][]string{},
	}
	const nMembers, nKeys, nValues, nOps = 4, 8, 3, 200
	type plan struct {
		m      *member
		cancel context.CancelFunc
		ops    []func()
		leave  int // index of the op before which the member leaves; -1: stays
		final  map[string]string
		left   atomic.Bool // set once the member has left and been detached
	}
	plans := make([]*plan, nMembers)
	for i := range plans {
		ctx, cancel := context.WithCancel(context.Background())
		m := &member{name: fmt.Sprintf("m%d", i), ctx: ctx}
		idx.byMember[m] = map[string][]string{}
		p := &plan{m: m, cancel: cancel, leave: -1, final: map[string]string{}}
		if rng.IntN(3) == 0 {
			p.leave = rng.IntN(nOps)
		}
		for range nOps {
			key := fmt.Sprintf("k%d", rng.IntN(nKeys))
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: key}, Data: map[string]string{"owner": fmt.Sprintf("v%d", rng.IntN(nValues))}}
			switch rng.IntN(4) {
			case 0:
				p.ops = append(p.ops, func() { idx.remove(m, cm) })
				delete(p.final, "ns/"+key)
			case 1:
				p.ops = append(p.ops, func() { idx.remove(m, toolscache.DeletedFinalStateUnknown{Key: "ns/" + key, Obj: cm}) })
				delete(p.final, "ns/"+key)
			default:
				p.ops = append(p.ops, func() { idx.set(m, cm) })
				p.final["ns/"+key] = cm.Data["owner"]
			}
		}
		plans[i] = p
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var bad error
	var badMu sync.Mutex
	lookupRng := rand.New(rand.NewPCG(seed, 1))
	go func() { // lookups all along: never a member that had left before
		for {
			select {
			case <-stop:
				return
			default:
			}
			gone := map[*member]bool{}
			for _, p := range plans {
				if p.left.Load() {
					gone[p.m] = true
				}
			}
			for _, h := range idx.lookup(fmt.Sprintf("v%d", lookupRng.IntN(nValues))) {
				if gone[h.m] {
					badMu.Lock()
					bad = fmt.Errorf("lookup returned an object of %s after it left", h.m.name)
					badMu.Unlock()
				}
			}
		}
	}()
	for _, p := range plans {
		wg.Go(func() {
			for i, op := range p.ops {
				if i == p.leave {
					p.cancel()
					idx.detach(p.m)
					p.left.Store(true)
				}
				op()
			}
		})
	}
	wg.Wait()
	close(stop)
	badMu.Lock()
	defer badMu.Unlock()
	if bad != nil {
		return bad
	}

	// Expected: value → "member/key" of members that stayed.
	want := map[string]map[string]bool{}
	for _, p := range plans {
		if p.leave >= 0 {
			if _, ok := idx.byMember[p.m]; ok {
				return fmt.Errorf("%s left but its record remains", p.m.name)
			}
			continue
		}
		for key, v := range p.final {
			if want[v] == nil {
				want[v] = map[string]bool{}
			}
			want[v][p.m.name+"/"+key] = true
		}
		p.cancel()
	}
	for v, set := range idx.byValue {
		for r := range set {
			if !want[v][r.m.name+"/"+r.key] {
				return fmt.Errorf("index holds %s/%s under %q, which is not its last value or its member left", r.m.name, r.key, v)
			}
		}
		if len(set) != len(want[v]) {
			return fmt.Errorf("index holds %d objects under %q, want %d", len(set), v, len(want[v]))
		}
	}
	for v, set := range want {
		if len(idx.byValue[v]) != len(set) {
			return fmt.Errorf("index holds %d objects under %q, want %d", len(idx.byValue[v]), v, len(set))
		}
	}
	return nil
}
