package fleet_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var handoffSoak = flag.Bool("handoff.soak", false, "run the hand-off soak at full length (3 replicas x 30 clusters, >= 100 hand-offs)")

// adoptingProvider is a custom provider as the seeds describe: it starts its
// clusters itself and engages them with the manager.
type adoptingProvider struct {
	cfgs map[multicluster.ClusterName]*rest.Config
}

func (p *adoptingProvider) Start(ctx context.Context, aware multicluster.Aware) error {
	for name, cfg := range p.cfgs {
		cl, err := cluster.New(cfg)
		if err != nil {
			return err
		}
		go func() { _ = cl.Start(ctx) }()
		if !cl.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("cluster %q: cache did not sync", name)
		}
		if err := aware.Engage(ctx, name, cl); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// everyReplica is a runnable that does not need leader election: a
// provider's loop runs on every replica. (A manager.RunnableFunc needs it, so
// under sharding it would run on the host's owner alone.)
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

func (p *adoptingProvider) Get(context.Context, multicluster.ClusterName) (cluster.Cluster, error) {
	return nil, multicluster.ErrClusterNotFound
}

func (p *adoptingProvider) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// The hand-off soak: three sharded replicas share clusters published by a
// built-in-style provider and adopted by a custom one; replicas stop cleanly
// or die abruptly (their host connection is cut and their work stopped: their
// Leases expire instead of being released) and join again, and clusters are
// added and removed, at random. Every reconcile is recorded with replica,
// cluster, start and end. No cluster is ever reconciled by two replicas at
// once, and after each disturbance every cluster is reconciled again, by one
// replica, within the lease duration plus one sync. Shortened here;
// -handoff.soak runs it at full length (3 replicas x 30 clusters, >= 100
// hand-offs).
func TestHandoffSoak(t *testing.T) {
	const ns = "handoff-soak"
	clusters, rounds := 12, 4
	if *handoffSoak {
		clusters, rounds = 30, 16
	}
	// syncBound is "one sync": a cluster's cache started and synced and its
	// first reconciles done, on a loaded test machine.
	const lease, syncBound = 3 * time.Second, 10 * time.Second
	var mu sync.Mutex // guards published, all and providers
	published := map[multicluster.ClusterName]*rest.Config{}
	adopted := map[multicluster.ClusterName]*rest.Config{}
	all := map[multicluster.ClusterName]bool{}
	for i := 1; i <= 3; i++ {
		testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(i)), ns)
		testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(i)), ns, "cm", nil)
	}
	for j := range clusters {
		cfg := members.Config(1 + j%3)
		name := fmt.Sprintf("published-%d", j)
		if j%5 == 4 {
			name = fmt.Sprintf("adopted-%d", j)
			adopted[name] = cfg
		} else {
			published[name] = cfg
		}
		all[name] = true
	}
	log := &spanLog{}
	generation := 0
	type replica struct {
		stop     context.CancelFunc
		host     *testbed.Proxy // its connection to the host, where the Leases are
		provider *configProvider
	}
	providers := map[string]*configProvider{}
	start := func(name string) replica {
		generation++
		hostCfg, host := testbed.Proxied(t, members.Config(0))
		mu.Lock()
		provider := newConfigProvider(maps.Clone(published))
		providers[name] = provider
		mu.Unlock()
		mgr := fleettest.NewManager(t, hostCfg, provider, mcmanager.WithSharding(sharding.Options{
			Namespace: "default", Name: "handoff-soak", Identity: name,
			LeaseDuration: lease, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
		}))
		if err := mgr.GetLocalManager().Add(everyReplica(func(ctx context.Context) error {
			return (&adoptingProvider{cfgs: adopted}).Start(ctx, mgr)
		})); err != nil {
			t.Fatal(err)
		}
		if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("soak-%s-%d", name, generation)).
			For(&corev1.ConfigMap{}).
			Complete(log.reconciler(name, ns)); err != nil {
			t.Fatal(err)
		}
		return replica{stop: fleettest.RunManager(t, mgr), host: host, provider: provider}
	}
	// covered checks the reconciles since the later of since and a second
	// ago: every cluster by exactly one replica, never by without (stopped),
	// and by need (joined again) for at least one cluster.
	covered := func(since time.Time, without, need string) func() error {
		return func() error {
			from := time.Now().Add(-time.Second)
			if since.After(from) {
				from = since
			}
			if time.Since(since) < 500*time.Millisecond {
				return fmt.Errorf("too early to tell")
			}
			owners := log.owners(from)
			needSeen := need == ""
			mu.Lock()
			defer mu.Unlock()
			for name := range all {
				if len(owners[name]) != 1 {
					return fmt.Errorf("%s reconciled by %v since %s", name, owners[name], from.Format(time.StampMilli))
				}
				if owners[name][without] {
					return fmt.Errorf("%s reconciled by the stopped replica %s", name, without)
				}
				needSeen = needSeen || owners[name][need]
			}
			if !needSeen {
				return fmt.Errorf("%s, joined again, reconciles no cluster", need)
			}
			return nil
		}
	}
	// within waits until check passes and fails the test if that took longer
	// than the lease duration plus one sync after the disturbance.
	var worst time.Duration
	within := func(what string, disturbed time.Time, check func() error) {
		t.Helper()
		fleettest.Eventually(t, time.Minute, check)
		took := time.Since(disturbed)
		worst = max(worst, took)
		if took > lease+syncBound {
			t.Errorf("%s: every cluster reconciled again only after %s, more than the lease duration plus one sync (%s)", what, took.Round(time.Millisecond), lease+syncBound)
		}
	}
	// onProviders calls f with every live replica's provider, once it runs.
	onProviders := func(f func(*configProvider)) {
		mu.Lock()
		live := maps.Clone(providers)
		mu.Unlock()
		for _, p := range live {
			select {
			case <-p.started:
				f(p)
			case <-time.After(time.Minute):
				t.Fatal("a provider did not start within a minute")
			}
		}
	}

	names := []string{"r1", "r2", "r3"}
	replicas := map[string]replica{}
	for _, r := range names {
		replicas[r] = start(r)
	}
	fleettest.Eventually(t, time.Minute, covered(time.Now(), "", ""))
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := map[string]int{}
	added := 0
	for round := range rounds {
		kind := []string{"stop", "kill", "add", "remove"}[round%4]
		if round >= 4 {
			kind = []string{"stop", "kill", "kill", "add", "remove"}[rng.IntN(5)]
		}
		kinds[kind]++
		disturbed := time.Now()
		switch kind {
		case "stop", "kill":
			r := names[rng.IntN(len(names))]
			if kind == "kill" {
				// It dies: nothing it holds is released (its host connection
				// is gone), its work stops; its Leases expire.
				replicas[r].host.Cut()
			}
			replicas[r].stop()
			mu.Lock()
			delete(providers, r)
			mu.Unlock()
			within(fmt.Sprintf("round %d: %s %s", round, r, kind), disturbed, covered(time.Now(), r, ""))
			joined := time.Now()
			replicas[r] = start(r) // it joins again: it takes its share back
			within(fmt.Sprintf("round %d: %s joined", round, r), joined, covered(joined, "", r))
			t.Logf("round %d: %s %s, joined again; all clusters covered after %s", round, r, kind, time.Since(disturbed).Round(time.Millisecond))
		case "add":
			name := fmt.Sprintf("added-%d", added)
			cfg := members.Config(1 + added%3)
			added++
			mu.Lock()
			published[name] = cfg
			all[name] = true
			mu.Unlock()
			onProviders(func(p *configProvider) { p.set(name, cfg) })
			within(fmt.Sprintf("round %d: %s added", round, name), disturbed, covered(disturbed, "", ""))
			t.Logf("round %d: %s added; all clusters covered after %s", round, name, time.Since(disturbed).Round(time.Millisecond))
		case "remove":
			mu.Lock()
			var candidates []multicluster.ClusterName
			for name := range published {
				candidates = append(candidates, name)
			}
			slices.Sort(candidates)
			name := candidates[rng.IntN(len(candidates))]
			delete(published, name)
			delete(all, name)
			mu.Unlock()
			onProviders(func(p *configProvider) { p.members.Remove(name) })
			fleettest.Eventually(t, time.Minute, func() error {
				if owners := log.owners(time.Now().Add(-time.Second)); len(owners[name]) > 0 {
					return fmt.Errorf("removed cluster %s still reconciled by %v", name, owners[name])
				}
				return nil
			})
			within(fmt.Sprintf("round %d: %s removed", round, name), disturbed, covered(disturbed, "", ""))
			t.Logf("round %d: %s removed; no longer reconciled after %s", round, name, time.Since(disturbed).Round(time.Millisecond))
		}
	}
	handoffs := log.handoffs()
	mu.Lock()
	n := len(all)
	mu.Unlock()
	t.Logf("%d clusters at the end, %d rounds %v, %d hand-offs, %d reconciles, slowest recovery %s (bound: lease %s + sync %s)",
		n, rounds, kinds, handoffs, log.count(), worst.Round(time.Millisecond), lease, syncBound)
	if o := log.overlaps(); len(o) > 0 {
		t.Fatalf("%d reconciles of one cluster by two replicas at once, e.g. %v", len(o), o[:min(3, len(o))])
	}
	if *handoffSoak && handoffs < 100 {
		t.Fatalf("only %d hand-offs", handoffs)
	}
}

// handoffs counts, per cluster, the changes of the replica reconciling it.
func (l *spanLog) handoffs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := map[string]string{}
	n := 0
	for _, s := range l.spans {
		if prev, ok := last[s.cluster]; ok && prev != s.replica {
			n++
		}
		last[s.cluster] = s.replica
	}
	return n
}

func (l *spanLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spans)
}
