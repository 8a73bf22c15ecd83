package fleet_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/mcruntime/multicluster-runtime/internal/mctest"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
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

func (p *adoptingProvider) Get(context.Context, multicluster.ClusterName) (cluster.Cluster, error) {
	return nil, multicluster.ErrClusterNotFound
}

func (p *adoptingProvider) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// The hand-off soak: three sharded replicas share clusters published by a
// built-in-style provider and adopted by a custom one; replicas stop and
// start again at random, and every reconcile is recorded with replica,
// cluster, start and end. No cluster is ever reconciled by two replicas at
// once, and after each disturbance every cluster is reconciled again within
// the lease duration plus a sync. Shortened here; -handoff.soak runs it at
// full length (3 replicas x 30 clusters, >= 100 hand-offs).
func TestHandoffSoak(t *testing.T) {
	const ns = "handoff-soak"
	clusters, rounds := 12, 4
	if *handoffSoak {
		clusters, rounds = 30, 12
	}
	published := map[multicluster.ClusterName]*rest.Config{}
	adopted := map[multicluster.ClusterName]*rest.Config{}
	for i := 1; i <= 3; i++ {
		mctest.CreateNamespace(t, mctest.NewClient(t, members.Config(i)), ns)
		mctest.CreateConfigMap(t, mctest.NewClient(t, members.Config(i)), ns, "cm", nil)
	}
	for j := range clusters {
		cfg := members.Config(1 + j%3)
		if j%5 == 4 {
			adopted[fmt.Sprintf("adopted-%d", j)] = cfg
		} else {
			published[fmt.Sprintf("published-%d", j)] = cfg
		}
	}
	log := &spanLog{}
	const lease = 3 * time.Second
	generation := 0
	start := func(replica string) context.CancelFunc {
		generation++
		provider := newConfigProvider(published)
		mgr := mctest.NewManager(t, members.Config(0), provider, mcmanager.WithSharding(sharding.Options{
			Namespace: "default", Name: "handoff-soak", Identity: replica,
			LeaseDuration: lease, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
		}))
		if err := mgr.GetLocalManager().Add(manager.RunnableFunc(func(ctx context.Context) error {
			return (&adoptingProvider{cfgs: adopted}).Start(ctx, mgr)
		})); err != nil {
			t.Fatal(err)
		}
		if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("soak-%s-%d", replica, generation)).
			For(&corev1.ConfigMap{}).
			Complete(log.reconciler(replica, ns)); err != nil {
			t.Fatal(err)
		}
		return mctest.Start(t, mgr)
	}
	all := map[multicluster.ClusterName]bool{}
	for n := range published {
		all[n] = true
	}
	for n := range adopted {
		all[n] = true
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

	replicas := []string{"r1", "r2", "r3"}
	stops := map[string]context.CancelFunc{}
	for _, r := range replicas {
		stops[r] = start(r)
	}
	mctest.Eventually(t, time.Minute, covered(time.Now(), "", ""))
	rng := rand.New(rand.NewPCG(1, 2))
	var worst time.Duration
	for round := range rounds {
		r := replicas[rng.IntN(len(replicas))]
		disturbed := time.Now()
		stops[r]() // a clean stop: its clusters move
		mctest.Eventually(t, time.Minute, covered(time.Now(), r, ""))
		joined := time.Now()
		stops[r] = start(r) // it joins again: it takes its share back
		mctest.Eventually(t, time.Minute, covered(joined, "", r))
		if d := time.Since(disturbed); d > worst {
			worst = d
		}
		t.Logf("round %d: %s stopped and joined again; all clusters covered after %s", round, r, time.Since(disturbed).Round(time.Millisecond))
	}
	handoffs := log.handoffs()
	t.Logf("%d clusters, %d rounds, %d hand-offs, %d reconciles, slowest round %s", len(all), rounds, handoffs, log.count(), worst.Round(time.Millisecond))
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
