package clusters_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// The members' model checker calls Set and Remove of a few names from
// several goroutines at once, as a provider with several workers does, and
// checks, whenever the schedule is quiet, that the engine holds exactly what
// Members recorded last for each name (the engine itself tells a rotation
// from a rebuild: see the fleet's model). The stand-in engine takes a random
// moment to record each call, as the real one does when its lock is busy.
// A failing seed prints itself; rerun it alone with
// go test -run TestMembersModel ./pkg/clusters/ -membersmodel.seed=N.
var membersModelSeed = flag.Uint64("membersmodel.seed", 0, "run the members' model checker with this seed only")

func TestMembersModel(t *testing.T) {
	if *membersModelSeed != 0 {
		runMembersModel(t, *membersModelSeed)
		return
	}
	for seed := uint64(1); seed <= 30; seed++ {
		if !runMembersModel(t, seed) {
			return
		}
	}
}

// recordingEngine is a fleet.Publisher that records the hash of the member
// it holds for each name.
type recordingEngine struct {
	mu      sync.Mutex
	members map[multicluster.ClusterName]string
}

func (r *recordingEngine) SetMember(m mcfleet.Member) {
	pause(m.Hash)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.members[m.Name] = m.Hash
}

func (r *recordingEngine) RemoveMember(name multicluster.ClusterName) {
	pause(name)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.members, name)
}

func (r *recordingEngine) Lookup(multicluster.ClusterName) (cluster.Cluster, bool) { return nil, false }

func (r *recordingEngine) Engage(context.Context, multicluster.ClusterName, cluster.Cluster) error {
	return errors.New("the model's engine takes members only")
}

// pause takes a moment half of the time.
func pause(s string) {
	if len(s)%2 == 0 {
		time.Sleep(50 * time.Microsecond)
	}
}

func runMembersModel(t *testing.T, seed uint64) bool {
	t.Helper()
	engine := &recordingEngine{members: map[multicluster.ClusterName]string{}}
	var m clusters.Members
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Start(ctx, engine, logr.Discard())
	names := []multicluster.ClusterName{"a", "b"}
	for round := range 20 {
		var wg sync.WaitGroup
		for w := range 4 {
			rng := rand.New(rand.NewPCG(seed, uint64(round*10+w)))
			wg.Go(func() {
				for step := range 10 {
					name := names[rng.IntN(len(names))]
					if rng.IntN(3) == 0 {
						m.Remove(name)
					} else {
						// Two servers per name, and a new token every time:
						// both rebuilds and rotations in place.
						hash := fmt.Sprintf("%d-%d-%d%s", round, w, step, string(make([]byte, rng.IntN(2))))
						cfg := &rest.Config{Host: fmt.Sprintf("https://%s-%d", name, rng.IntN(2)), BearerToken: hash}
						m.Set(name, hash, cfg, nil)
					}
				}
			})
		}
		wg.Wait()
		engine.mu.Lock()
		for _, name := range names {
			want, wanted := m.Hash(name)
			got, held := engine.members[name]
			if wanted != held || want != got {
				engine.mu.Unlock()
				t.Errorf("seed %d, round %d: Members recorded %q (wanted %v) for %s, the engine holds %q (%v); rerun alone: go test -race -run TestMembersModel ./pkg/clusters/ -membersmodel.seed=%d",
					seed, round, want, wanted, name, got, held, seed)
				return false
			}
		}
		engine.mu.Unlock()
	}
	return true
}
