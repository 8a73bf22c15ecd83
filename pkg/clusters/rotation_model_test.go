package clusters_test

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// The rotation model checker drives Members and a real fleet engine, with
// health probes, against the test fleet's API servers, through random steps
// of a provider's life, and checks after each that the engine runs what the
// source says, and how it got there:
//
//   - a rotated token (same server and CA) keeps the running cluster: same
//     instance, never engaged again;
//   - a server change builds a new cluster, on the new server;
//   - a rotation racing a removal leaves what Members decided last: removed,
//     or a cluster built anew with the rotated token;
//   - a token the member stops accepting while the source already holds the
//     next one, which the provider has not read: the probe's 401 asks for a
//     refresh, the new token is rotated in place and the cluster never
//     leaves engaged.
//
// A failing seed prints itself; rerun it alone with
// go test -race -run TestRotationModel ./pkg/clusters/ -rotationmodel.seed=N.
var rotationModelSeed = flag.Uint64("rotationmodel.seed", 0, "run the rotation model checker with this seed only")

func TestRotationModel(t *testing.T) {
	tks := [2]*tokens{newTokens(t, 0), newTokens(t, 1)}
	seeds := []uint64{1, 2, 3}
	if *rotationModelSeed != 0 {
		seeds = []uint64{*rotationModelSeed}
	}
	for _, seed := range seeds {
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runRotationModel(t, tks, seed) }) {
			t.Logf("seed %d failed; rerun it alone: go test -race -run TestRotationModel ./pkg/clusters/ -rotationmodel.seed=%d", seed, seed)
			return
		}
	}
}

// rotationSource is the provider's source of truth: each name's config, and
// the Secret its token is bound to.
type rotationSource struct {
	mu        sync.Mutex
	cfgs      map[multicluster.ClusterName]*rest.Config
	holders   map[multicluster.ClusterName]string
	members   map[multicluster.ClusterName]int
	refreshed map[multicluster.ClusterName]int
}

func (s *rotationSource) put(name multicluster.ClusterName, m int, cfg *rest.Config, holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfgs[name], s.members[name], s.holders[name] = cfg, m, holder
}

func (s *rotationSource) get(name multicluster.ClusterName) (*rest.Config, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg, ok := s.cfgs[name]
	return cfg, ok
}

// publish is the provider reading its source for name.
func (s *rotationSource) publish(m *clusters.Members, name multicluster.ClusterName) {
	if cfg, ok := s.get(name); ok {
		m.Set(name, cfg.BearerToken, cfg, nil)
	}
}

func runRotationModel(t *testing.T, tks [2]*tokens, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 33))
	src := &rotationSource{cfgs: map[string]*rest.Config{}, holders: map[string]string{}, members: map[string]int{}, refreshed: map[string]int{}}
	tracker := fleettest.NewTracker()
	m := &clusters.Members{}
	m.Refresh = func(name multicluster.ClusterName) {
		src.mu.Lock()
		src.refreshed[name]++
		src.mu.Unlock()
		src.publish(m, name)
	}
	runEngine(t, mcfleet.Options{
		Health:     mcfleet.HealthOptions{Interval: 100 * time.Millisecond, FailureThreshold: 5},
		MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
	}, tracker, m)

	names := []multicluster.ClusterName{"a", "b"}
	running := map[multicluster.ClusterName]cluster.Cluster{}
	for _, name := range names {
		member := rng.IntN(2)
		cfg, holder := tks[member].config(t)
		src.put(name, member, cfg, holder)
		src.publish(m, name)
	}
	check := func(step int, what string, same map[multicluster.ClusterName]bool) {
		t.Helper()
		t.Logf("seed %d step %d: %s %v", seed, step, what, slices.Sorted(maps.Keys(same)))
		var engaged map[multicluster.ClusterName]cluster.Cluster
		fleettest.Eventually(t, 30*time.Second, func() error {
			engaged = tracker.Engaged()
			for _, name := range names {
				cfg, wanted := src.get(name)
				cl, ok := engaged[name]
				switch {
				case !wanted && ok:
					return fmt.Errorf("%s is engaged, the source has none", name)
				case !wanted:
				case !ok:
					return fmt.Errorf("%s is not engaged", name)
				case cl.GetConfig().Host != cfg.Host || cl.GetConfig().BearerToken != cfg.BearerToken:
					return fmt.Errorf("%s runs on another server or token than the source's", name)
				}
			}
			return nil
		})
		for name, keep := range same {
			if cl := engaged[name]; keep && cl != running[name] {
				t.Errorf("seed %d step %d (%s): %s was built again, want the running cluster rotated in place", seed, step, what, name)
			} else if !keep && cl != nil && cl == running[name] {
				t.Errorf("seed %d step %d (%s): %s runs the cluster it ran before, want one built anew", seed, step, what, name)
			}
		}
		running = maps.Clone(engaged)
	}
	check(0, "start", nil)

	for step := 1; step <= 8; step++ {
		name := names[rng.IntN(len(names))]
		src.mu.Lock()
		_, wanted := src.cfgs[name]
		member, oldHolder := src.members[name], src.holders[name]
		src.mu.Unlock()
		count := tracker.Count(name)
		if !wanted {
			cfg, holder := tks[member].config(t)
			src.put(name, member, cfg, holder)
			src.publish(m, name)
			check(step, "added again", map[multicluster.ClusterName]bool{name: false})
			continue
		}
		switch op := rng.IntN(4); op {
		case 0: // a new token
			cfg, holder := tks[member].config(t)
			src.put(name, member, cfg, holder)
			src.publish(m, name)
			check(step, "rotation", map[multicluster.ClusterName]bool{name: true})
			if n := tracker.Count(name); n != count {
				t.Errorf("seed %d step %d: a rotation engaged %s %d more times, want none", seed, step, name, n-count)
			}
		case 1: // another server
			other := 1 - member
			cfg, holder := tks[other].config(t)
			src.put(name, other, cfg, holder)
			src.publish(m, name)
			check(step, "server change", map[multicluster.ClusterName]bool{name: false})
		case 2: // a rotation racing a removal
			cfg, holder := tks[member].config(t)
			var wg sync.WaitGroup
			wg.Go(func() { m.Set(name, cfg.BearerToken, cfg, nil) })
			wg.Go(func() { m.Remove(name) })
			wg.Wait()
			if slices.Contains(m.Names(), name) {
				src.put(name, member, cfg, holder)
				check(step, "rotation after a removal", map[multicluster.ClusterName]bool{name: false})
			} else {
				src.mu.Lock()
				delete(src.cfgs, name)
				src.mu.Unlock()
				check(step, "removal after a rotation", nil)
			}
		case 3: // the member refuses the token; the source holds the next
			src.mu.Lock()
			refreshed := src.refreshed[name]
			src.mu.Unlock()
			cfg, holder := tks[member].config(t)
			src.put(name, member, cfg, holder)
			tks[member].invalidate(t, oldHolder)
			check(step, "refresh after a 401", map[multicluster.ClusterName]bool{name: true})
			src.mu.Lock()
			if src.refreshed[name] == refreshed {
				t.Errorf("seed %d step %d: %s took its new token without a refresh: the 401 path was not exercised", seed, step, name)
			}
			src.mu.Unlock()
			if n := tracker.Count(name); n != count {
				t.Errorf("seed %d step %d: %s was engaged %d more times after its token was refused, want none (it left engaged)", seed, step, name, n-count)
			}
		}
	}
}
