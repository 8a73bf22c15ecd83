package fleet_test

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// span is one reconcile: which replica ran it for which cluster, and when.
type span struct {
	replica, cluster string
	start, end       time.Time
}

type spanLog struct {
	mu    sync.Mutex
	spans []span
}

func (l *spanLog) reconciler(replica, ns string) mcreconcile.Func {
	return func(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		if req.Namespace != ns {
			return reconcile.Result{}, nil
		}
		start := time.Now()
		time.Sleep(2 * time.Millisecond) // a reconcile takes time: spans have length
		l.mu.Lock()
		l.spans = append(l.spans, span{replica: replica, cluster: req.ClusterName, start: start, end: time.Now()})
		l.mu.Unlock()
		// Keep every cluster busy, so that a hand-off with an overlap would show.
		return reconcile.Result{RequeueAfter: 20 * time.Millisecond}, nil
	}
}

// owners returns, per cluster, the replicas that reconciled it since t.
func (l *spanLog) owners(since time.Time) map[string]map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]map[string]bool{}
	for _, s := range l.spans {
		if s.start.Before(since) {
			continue
		}
		if out[s.cluster] == nil {
			out[s.cluster] = map[string]bool{}
		}
		out[s.cluster][s.replica] = true
	}
	return out
}

// overlaps returns every pair of spans of one cluster run by two replicas at once.
func (l *spanLog) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	byCluster := map[string][]span{}
	for _, s := range l.spans {
		byCluster[s.cluster] = append(byCluster[s.cluster], s)
	}
	var out []string
	for cluster, spans := range byCluster {
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		for i := range spans {
			for j := i + 1; j < len(spans) && spans[j].start.Before(spans[i].end); j++ {
				if spans[j].replica != spans[i].replica {
					out = append(out, fmt.Sprintf("%s: %s and %s at %s", cluster, spans[i].replica, spans[j].replica, spans[j].start.Format(time.StampMicro)))
				}
			}
		}
	}
	return out
}

// Three replicas share twelve clusters: each is reconciled by exactly one
// replica; a replica that stops cleanly hands its clusters over at once, one
// that is cut off from the host loses them when its lease runs out; no
// cluster is ever reconciled by two replicas at once, and every cluster is
// covered after the hand-offs.
func TestShardingAcrossReplicas(t *testing.T) {
	const ns = "sharded"
	cfgs := map[multicluster.ClusterName]*rest.Config{}
	for i := 1; i <= 3; i++ {
		testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(i)), ns)
		testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(i)), ns, "cm", nil)
		for j := range 4 {
			cfgs[fmt.Sprintf("shard-%d-%d", i, j)] = members.Config(i)
		}
	}
	hostURL, err := url.Parse(members.Config(0).Host)
	if err != nil {
		t.Fatal(err)
	}
	log := &spanLog{}
	stops := map[string]context.CancelFunc{}
	engines := map[string]*fleet.Engine{}
	var cutOff *testbed.Proxy
	for _, replica := range []string{"r1", "r2", "r3"} {
		host := members.Config(0)
		if replica == "r2" {
			// r2 reaches the host through a proxy: cutting it is a crash, as
			// its peers see it (no release, the lease runs out).
			cutOff = testbed.NewProxy(t, hostURL.Host)
			cutOff.SetUp(true)
			host.Host = "https://" + cutOff.Addr()
		}
		mgr := fleettest.NewManager(t, host, newConfigProvider(cfgs), mcmanager.WithSharding(sharding.Options{
			Namespace: "default", Name: "sharding-test", Identity: replica,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
		}))
		if err := mcbuilder.ControllerManagedBy(mgr).Named("sharded-" + replica).For(&corev1.ConfigMap{}).
			Complete(log.reconciler(replica, ns)); err != nil {
			t.Fatal(err)
		}
		stops[replica] = fleettest.RunManager(t, mgr)
		engines[replica] = mgr.(mcmanager.FleetOwner).Fleet()
	}

	// covered checks the last second of reconciles: every cluster by exactly
	// one of replicas.
	covered := func(replicas ...string) func() error {
		allowed := map[string]bool{}
		for _, r := range replicas {
			allowed[r] = true
		}
		return func() error {
			since := time.Now().Add(-time.Second)
			owners := log.owners(since)
			for name := range cfgs {
				got := owners[name]
				if len(got) == 0 {
					return fmt.Errorf("%s not reconciled since %s", name, since.Format(time.StampMilli))
				}
				if len(got) > 1 {
					return fmt.Errorf("%s reconciled by %v", name, got)
				}
				for r := range got {
					if !allowed[r] {
						return fmt.Errorf("%s reconciled by %s", name, r)
					}
				}
			}
			return nil
		}
	}
	fleettest.Eventually(t, time.Minute, covered("r1", "r2", "r3"))
	t.Logf("12 clusters shared: %v", log.owners(time.Now().Add(-time.Second)))

	stops["r1"]() // a clean stop
	stopped := time.Now()
	fleettest.Eventually(t, time.Minute, covered("r2", "r3"))
	t.Logf("clean stop: clusters moved within %s", time.Since(stopped))

	cutOff.Cut() // a crash, as the others see it
	crashed := time.Now()
	defer func() {
		if t.Failed() {
			for r, e := range engines {
				t.Logf("%s: %v", r, e.Clusters())
			}
		}
	}()
	fleettest.Eventually(t, time.Minute, covered("r3"))
	t.Logf("crash: clusters moved within %s (lease 3s)", time.Since(crashed))

	if o := log.overlaps(); len(o) > 0 {
		t.Fatalf("%d reconciles of one cluster by two replicas at once, e.g. %v", len(o), o[:min(3, len(o))])
	}
}
