package builder_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

const ownerField = "metadata.labels.owner"

func ownerLabel(obj client.Object) []string {
	if v, ok := obj.GetLabels()["owner"]; ok {
		return []string{v}
	}
	return nil
}

// An index registered before Start reaches the host and clusters engaged
// later; MatchingFields works on each.
func TestIndexRegisteredBeforeStartReachesEveryCluster(t *testing.T) {
	e := newEnv(t)
	must(t, e.mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.ConfigMap{}, ownerField, ownerLabel))
	e.engage(1)
	fleettest.RunManager(t, e.mgr)
	e.engage(2) // after Start

	clients := map[string]client.Client{"": e.host, member(1): e.members[0], member(2): e.members[1]}
	for name, c := range clients {
		for _, owner := range []string{"alice", "bob"} {
			cm := testbed.CreateConfigMap(t, c, e.ns, fmt.Sprintf("%s-of-%s", owner, clusterOrHost(name)), nil)
			cm.Labels = map[string]string{"owner": owner}
			must(t, c.Update(context.Background(), cm))
		}
	}
	for name := range clients {
		fleettest.Eventually(t, 0, func() error {
			cl, err := e.mgr.GetCluster(context.Background(), name)
			if err != nil {
				return err
			}
			list := &corev1.ConfigMapList{}
			if err := cl.GetClient().List(context.Background(), list, client.InNamespace(e.ns), client.MatchingFields{ownerField: "alice"}); err != nil {
				return err
			}
			if len(list.Items) != 1 || list.Items[0].Name != "alice-of-"+clusterOrHost(name) {
				return fmt.Errorf("cluster %q: index lookup returned %d items", name, len(list.Items))
			}
			return nil
		})
	}
}

func clusterOrHost(name string) string {
	if name == "" {
		return "host"
	}
	return name
}

// An error wrapping ErrClusterNotFound ends the request without requeue; the
// builder's default can be turned off, and then it is retried.
func TestClusterNotFoundErrorsAreNotRequeued(t *testing.T) {
	for _, wrap := range []bool{true, false} {
		t.Run(fmt.Sprintf("wrapper=%v", wrap), func(t *testing.T) {
			e := newEnv(t)
			rec := e.recorder()
			rec.Result = func(context.Context, mcreconcile.Request) (reconcile.Result, error) {
				return reconcile.Result{}, fmt.Errorf("reading: %w", multicluster.ErrClusterNotFound)
			}
			must(t, e.builder().For(&corev1.ConfigMap{}).WithClusterNotFoundWrapper(wrap).Complete(rec))
			e.engage(1)
			fleettest.RunManager(t, e.mgr)
			testbed.CreateConfigMap(t, e.members[0], e.ns, "cm", nil)
			if !wrap {
				rec.WaitFor(t, 3, member(1), e.ns, "cm") // retried with backoff
				return
			}
			rec.WaitFor(t, 1, member(1), e.ns, "cm")
			// Barrier: the first attempt's requeue (had there been one, after 5ms
			// backoff) would come before this later object's event is done.
			for i := range 3 {
				name := fmt.Sprintf("later-%d", i)
				testbed.CreateConfigMap(t, e.members[0], e.ns, name, nil)
				rec.WaitFor(t, 1, member(1), e.ns, name)
			}
			if n := rec.Count(member(1), e.ns, "cm"); n != 1 {
				t.Errorf("reconciled %d times, want once", n)
			}
		})
	}
}

// Engaging a name with a new cluster instance swaps cleanly: the old watches
// are gone, the new one reports once per change.
func TestReplacingAClusterSwapsItsWatches(t *testing.T) {
	e := newEnv(t)
	rec := e.recorder()
	must(t, e.builder().For(&corev1.ConfigMap{}).Complete(rec))
	fleettest.RunManager(t, e.mgr)

	// A custom provider (pkg/clusters) engages and replaces through the manager.
	const name = "replaced"
	var custom pkgclusters.Clusters[cluster.Cluster]
	old := testbed.NewCluster(t, fleet.Config(1))
	must(t, custom.Add(t.Context(), name, old, e.mgr))
	testbed.CreateConfigMap(t, e.members[0], e.ns, "in-old", nil)
	rec.WaitFor(t, 1, name, e.ns, "in-old")

	// Replace with a cluster on another API server, through the manager's
	// engagement path (a provider re-engaging under the same name).
	newer := testbed.NewCluster(t, fleet.Config(2))
	must(t, custom.AddOrReplace(t.Context(), name, newer, e.mgr))
	cl, err := e.mgr.GetCluster(context.Background(), name)
	must(t, err)
	if cl != newer {
		t.Fatal("manager still returns the old cluster")
	}

	testbed.CreateConfigMap(t, e.members[0], e.ns, "in-old-after", nil)
	testbed.CreateConfigMap(t, e.members[1], e.ns, "in-new", nil)
	rec.WaitFor(t, 1, name, e.ns, "in-new")
	testbed.CreateConfigMap(t, e.members[1], e.ns, "barrier", nil)
	rec.WaitFor(t, 1, name, e.ns, "barrier")
	if n := rec.Count(name, e.ns, "in-old-after"); n != 0 {
		t.Errorf("old cluster's watch still delivers: %d", n)
	}
	if n := rec.Count(name, e.ns, "in-new"); n != 1 {
		t.Errorf("new object reconciled %d times, want once", n)
	}
}

// Create, update and delete events all reach a lifted controller-runtime
// handler, tagged with their cluster; WithEventFilter and per-watch predicates
// apply in every cluster.
func TestEventsPredicatesAndLiftedHandlers(t *testing.T) {
	e := newEnv(t)
	type key struct{ cluster, kind, name string }
	var mu = make(chan struct{}, 1)
	seen := map[key]int{}
	count := func(cluster, kind, name string) int {
		mu <- struct{}{}
		defer func() { <-mu }()
		return seen[key{cluster, kind, name}]
	}
	var lifted atomic.Int32
	recordingHandler := mchandler.LiftFactory(func(clusterName string, _ cluster.Cluster) handler.EventHandler {
		lifted.Add(1)
		note := func(kind string, obj client.Object) {
			if obj.GetNamespace() != e.ns {
				return
			}
			mu <- struct{}{}
			seen[key{clusterName, kind, obj.GetName()}]++
			<-mu
		}
		return handler.Funcs{
			CreateFunc: func(_ context.Context, ev event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				note("create", ev.Object)
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ev.Object)})
			},
			UpdateFunc: func(_ context.Context, ev event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				note("update", ev.ObjectNew)
			},
			DeleteFunc: func(_ context.Context, ev event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				note("delete", ev.Object)
			},
		}
	})
	rec := e.recorder()
	skipIgnored := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["ignore"] != "true" })
	onlyPrefixed := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() != "filtered-by-watch" })
	must(t, e.builder().
		Watches(&corev1.ConfigMap{}, recordingHandler, mcbuilder.WithPredicates(onlyPrefixed)).
		WithEventFilter(skipIgnored).
		Complete(rec))
	e.engage(1)
	e.engage(2)
	fleettest.RunManager(t, e.mgr)
	// The watches must be running before the objects below come and go: an
	// object created and deleted before its cluster's first list is never seen.
	for i := 1; i <= 2; i++ {
		testbed.CreateConfigMap(t, e.members[i-1], e.ns, "ready", nil)
		rec.WaitFor(t, 1, member(i), e.ns, "ready")
	}

	ctx := context.Background()
	for i := 1; i <= 2; i++ {
		c := e.members[i-1]
		cm := testbed.CreateConfigMap(t, c, e.ns, "cm", nil)
		ignored := &corev1.ConfigMap{}
		ignored.Namespace, ignored.Name, ignored.Labels = e.ns, "ignored", map[string]string{"ignore": "true"}
		must(t, c.Create(ctx, ignored))
		testbed.CreateConfigMap(t, c, e.ns, "filtered-by-watch", nil)
		cm.Data = map[string]string{"k": "v"}
		must(t, c.Update(ctx, cm))
		must(t, c.Delete(ctx, cm))
		rec.WaitFor(t, 1, member(i), e.ns, "cm")
	}
	for i := 1; i <= 2; i++ {
		for _, kind := range []string{"create", "update", "delete"} {
			fleettest.Eventually(t, 0, func() error {
				if count(member(i), kind, "cm") != 1 {
					return fmt.Errorf("%s: %s events for cm: %d", member(i), kind, count(member(i), kind, "cm"))
				}
				return nil
			})
		}
	}
	// The global filter rejected "ignored", the watch predicate
	// "filtered-by-watch"; both were created before "cm" was deleted, whose
	// event has been seen.
	for i := 1; i <= 2; i++ {
		if n := count(member(i), "create", "filtered-by-watch"); n != 0 {
			t.Errorf("%s: watch predicate let through %d events", member(i), n)
		}
		if n := count(member(i), "create", "ignored"); n != 0 {
			t.Errorf("%s: WithEventFilter let through %d events", member(i), n)
		}
	}
	if n := lifted.Load(); n < 2 {
		t.Errorf("handler factory called %d times, want once per cluster (2)", n)
	}
}

// Generic events sent on a channel reach the handler of the cluster they
// name; events for clusters that are not engaged are dropped.
func TestGenericEventsFromAChannel(t *testing.T) {
	e := newEnv(t)
	events := make(chan mcsource.GenericEvent[client.Object])
	rec := e.recorder()
	must(t, e.builder().WatchesRawSource(mcsource.Channel(events, mchandler.EnqueueRequestForObject)).Complete(rec))
	e.engage(1)
	e.engage(2)
	fleettest.RunManager(t, e.mgr)
	fleettest.Eventually(t, 0, func() error {
		_, err := e.mgr.GetCluster(context.Background(), member(2))
		return err
	})

	obj := &corev1.ConfigMap{}
	obj.Namespace, obj.Name = e.ns, "external"
	send := func(cluster string) {
		select {
		case events <- mcsource.GenericEvent[client.Object]{ClusterName: cluster, Object: obj}:
		case <-time.After(30 * time.Second):
			t.Fatal("nobody reads the channel")
		}
	}
	send("not-engaged")
	send(member(2))
	rec.WaitFor(t, 1, member(2), e.ns, "external")
	if n := rec.Count(member(1), e.ns, "external") + rec.Count("not-engaged", e.ns, "external"); n != 0 {
		t.Errorf("event reached other clusters: %v", rec.Counts())
	}
}
