package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// firstSeen records when each object was created and when it was first
// reconciled.
type firstSeen struct {
	mu      sync.Mutex
	created map[mcreconcile.Request]time.Time
	latency map[mcreconcile.Request]time.Duration
}

func (f *firstSeen) create(t *testing.T, c client.Client, req mcreconcile.Request) {
	f.mu.Lock()
	f.created[req] = time.Now()
	f.mu.Unlock()
	testbed.CreateConfigMap(t, c, req.Namespace, req.Name, nil)
}

func (f *firstSeen) seen(req mcreconcile.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if at, ok := f.created[req]; ok {
		if _, done := f.latency[req]; !done {
			f.latency[req] = time.Since(at)
		}
	}
}

// reset forgets the objects created so far.
func (f *firstSeen) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = map[mcreconcile.Request]time.Time{}
	f.latency = map[mcreconcile.Request]time.Duration{}
}

// missingExcept returns the created objects not reconciled yet, but those of cluster.
func (f *firstSeen) missingExcept(cluster string) []mcreconcile.Request {
	missed, _ := f.missing()
	return slices.DeleteFunc(missed, func(r mcreconcile.Request) bool { return r.ClusterName == cluster })
}

// latenciesExcept returns the latencies of the created objects reconciled so far, but those of cluster, sorted.
func (f *firstSeen) latenciesExcept(cluster string) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for req, d := range f.latency {
		if req.ClusterName != cluster {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// missing returns the created objects not reconciled yet, and the latencies so far, sorted.
func (f *firstSeen) missing() ([]mcreconcile.Request, []time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var missed []mcreconcile.Request
	var got []time.Duration
	for req := range f.created {
		if d, ok := f.latency[req]; ok {
			got = append(got, d)
		} else {
			missed = append(missed, req)
		}
	}
	slices.Sort(got)
	return missed, got
}

// With default options (controller workers, health checks, request bound), a
// member that accepts connections and never answers, or that flaps between
// answering and not, does not stall the fleet. Its reconciles, which read it
// live, hang; meanwhile every object created in the healthy members is
// reconciled, and those created in the disturbed member are reconciled once
// it answers again. The healthy members' create-to-reconcile latencies (p50,
// p99) are logged; BenchmarkBlackholedMember reports them beside the figures
// before the blackhole and with one worker.
func TestBlackholedMemberDoesNotStallTheFleet(t *testing.T) {
	const ns = "isolation"
	p, proxy := threeMembers(t, ns, "holed")
	mgr := fleettest.NewManager(t, members.Config(0), p)
	seen := &firstSeen{created: map[mcreconcile.Request]time.Time{}, latency: map[mcreconcile.Request]time.Duration{}}
	// A status-keeping reconciler: it reads its object live from the member
	// and looks again every second.
	if err := mcbuilder.ControllerManagedBy(mgr).Named("isolation").For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			if req.Namespace != ns {
				return reconcile.Result{}, nil
			}
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return reconcile.Result{}, err
			}
			if err := cl.GetAPIReader().Get(ctx, req.NamespacedName, &corev1.ConfigMap{}); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			seen.seen(req)
			return reconcile.Result{RequeueAfter: time.Second}, nil
		})); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	clients := map[string]client.Client{}
	for i, name := range []string{"m1", "m2", "holed"} {
		clients[name] = testbed.NewClient(t, members.Config(i+1))
		for j := range 5 {
			seen.create(t, clients[name], fleettest.Request(name, ns, fmt.Sprintf("steady-%d", j)))
		}
	}
	fleettest.Eventually(t, time.Minute, func() error {
		if missed, _ := seen.missing(); len(missed) > 0 {
			return fmt.Errorf("not reconciled before the blackhole: %v", missed)
		}
		return nil
	})

	// A phase: while disturb runs, create objects in every member, one in a
	// healthy member every 200 ms; every one of those is reconciled before the
	// disturbance ends. Afterwards, so are those of the disturbed member.
	phase := func(name string, disturb func(stop <-chan struct{})) {
		seen.reset()
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() { defer close(stopped); disturb(stop) }()
		began := time.Now()
		for i := range 40 {
			healthy := []string{"m1", "m2"}[i%2]
			seen.create(t, clients[healthy], fleettest.Request(healthy, ns, fmt.Sprintf("%s-%d", name, i)))
			if i%4 == 0 {
				seen.create(t, clients["holed"], fleettest.Request("holed", ns, fmt.Sprintf("%s-%d", name, i)))
			}
			time.Sleep(200 * time.Millisecond) // the load's pace, not a wait for an outcome
		}
		fleettest.Eventually(t, 10*time.Second, func() error {
			if missed := seen.missingExcept("holed"); len(missed) > 0 {
				return fmt.Errorf("%s: %d objects of healthy members not reconciled while a member is disturbed: %v", name, len(missed), missed)
			}
			return nil
		})
		latencies := seen.latenciesExcept("holed")
		t.Logf("%s (%s): %d objects of healthy members reconciled, create to reconcile p50 %s, p99 %s", name,
			time.Since(began).Round(time.Millisecond), len(latencies), percentile(latencies, 0.5), percentile(latencies, 0.99))
		close(stop)
		<-stopped
		proxy.SetUp(true)
		fleettest.Eventually(t, 2*time.Minute, func() error {
			if missed, _ := seen.missing(); len(missed) > 0 {
				return fmt.Errorf("after %s: not reconciled: %v", name, missed)
			}
			return nil
		})
	}
	phase("blackholed", func(stop <-chan struct{}) {
		proxy.Blackhole()
		<-stop
	})
	// Flapping: not answering for 2 s, then answering for 1 s. Connections
	// opened in a hole stay hung until the next one cuts them: each of the
	// member's reconciles may hang for up to 3 s.
	phase("flapping", func(stop <-chan struct{}) {
		for {
			for _, step := range []struct {
				apply func()
				lasts time.Duration
			}{{proxy.Blackhole, 2 * time.Second}, {func() { proxy.SetUp(true) }, time.Second}} {
				step.apply()
				select {
				case <-stop:
					return
				case <-time.After(step.lasts):
				}
			}
		}
	})
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))].Round(time.Millisecond)
}

// A reconcile in flight against a member ends when the member is
// disconnected: its context is cancelled, so the worker it held is free at
// once, and the request is dropped for a counted reason (the member's initial
// list brings it back when it is engaged again).
func TestDisconnectEndsReconcilesInFlight(t *testing.T) {
	const ns = "inflight"
	testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(2)), ns)
	holed, proxy := testbed.Proxied(t, members.Config(2))
	p := newConfigProvider(map[multicluster.ClusterName]*rest.Config{"holed": holed})
	health := mcmanager.HealthOptions{Interval: 200 * time.Millisecond, Timeout: 200 * time.Millisecond, FailureThreshold: 3}
	mgr := fleettest.NewManager(t, members.Config(0), p, mcmanager.WithHealthChecks(health))
	ended := make(chan error, 10)
	var holding sync.Once
	held := make(chan struct{})
	if err := mcbuilder.ControllerManagedBy(mgr).Named("inflight").For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			if req.Namespace != ns {
				return reconcile.Result{}, nil
			}
			select {
			case <-held:
			default:
				return reconcile.Result{RequeueAfter: 50 * time.Millisecond}, nil
			}
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return reconcile.Result{}, err
			}
			start := time.Now()
			err = cl.GetAPIReader().Get(ctx, req.NamespacedName, &corev1.ConfigMap{})
			ended <- fmt.Errorf("after %s: %w", time.Since(start).Round(time.Millisecond), err)
			return reconcile.Result{}, err
		})); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	eng := mgr.(mcmanager.FleetOwner).Fleet()
	fleettest.Eventually(t, time.Minute, func() error {
		if s, _ := eng.State("holed"); s != fleet.StateEngaged {
			return fmt.Errorf("holed is %s", s)
		}
		return nil
	})
	dropped := testutil.ToFloat64(metrics.DroppedRequests.WithLabelValues("inflight", "cluster-disengaged"))
	testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(2)), ns, "cm", map[string]string{"k": "v"})
	// Once the object is in the cache, blackhole the member; the next
	// reconcile reads it live and hangs until the member is disconnected.
	fleettest.Eventually(t, 30*time.Second, func() error {
		cl, err := mgr.GetCluster(context.Background(), "holed")
		if err != nil {
			return err
		}
		return cl.GetCache().Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "cm"}, &corev1.ConfigMap{})
	})
	proxy.Blackhole()
	holding.Do(func() { close(held) })

	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the reconcile in flight ended with %v, want a cancelled context", err)
		}
		if s, _ := eng.State("holed"); s != fleet.StateDisconnected {
			t.Fatalf("the reconcile in flight ended (%v) while the member is %s", err, s)
		}
		t.Logf("the reconcile in flight ended when the member was disconnected: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the reconcile in flight did not end within a minute of the blackhole")
	}
	fleettest.Eventually(t, 10*time.Second, func() error {
		if got := testutil.ToFloat64(metrics.DroppedRequests.WithLabelValues("inflight", "cluster-disengaged")) - dropped; got < 1 {
			return fmt.Errorf("multicluster_dropped_requests_total{controller=inflight,reason=cluster-disengaged} grew by %v, want 1", got)
		}
		return nil
	})
	proxy.SetUp(true)
}
