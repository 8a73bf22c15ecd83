package builder_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// With one worker and thousands of requests queued for a busy cluster, a
// request for a quiet cluster is reconciled after a handful of the busy ones,
// not behind all of them; WithFairQueue(false) restores the plain order,
// where it waits for the whole backlog.
func TestFairQueueServesQuietClusterBeforeBusyBacklog(t *testing.T) {
	const flood = 2000
	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			e := newEnv(t)
			var mu sync.Mutex
			var order []string
			busyAtQuiet := -1 // busy requests reconciled when the quiet one was queued
			r := mcreconcile.Func(func(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
				if req.Namespace != e.ns {
					return reconcile.Result{}, nil
				}
				mu.Lock()
				order = append(order, req.ClusterName+"/"+req.Name)
				mu.Unlock()
				if strings.HasPrefix(req.Name, "busy-") {
					time.Sleep(2 * time.Millisecond) // the work of a busy cluster's reconcile
				}
				return reconcile.Result{}, nil
			})
			// Creating "flood" in a cluster queues 2,000 requests for it at once.
			fanOut := mchandler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
				if obj.GetNamespace() != e.ns {
					return nil
				}
				if obj.GetName() == "quiet" {
					mu.Lock()
					busyAtQuiet = countBusy(order)
					mu.Unlock()
				}
				if obj.GetName() != "flood" {
					return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
				}
				reqs := make([]reconcile.Request, flood)
				for i := range reqs {
					reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: e.ns, Name: fmt.Sprintf("busy-%d", i)}}
				}
				return reqs
			})
			if err := e.builder().Watches(&corev1.ConfigMap{}, fanOut).
				WithOptions(mccontroller.Options{MaxConcurrentReconciles: 1}).
				WithFairQueue(fair).Complete(r); err != nil {
				t.Fatal(err)
			}
			e.engage(1)
			e.engage(2)
			fleettest.RunManager(t, e.mgr)

			position := func(name string) int {
				mu.Lock()
				defer mu.Unlock()
				return slices.Index(order, name)
			}
			// Both clusters' caches have listed, so that what follows are live
			// events of one priority: initial-list events go behind live ones.
			for i := 1; i <= 2; i++ {
				testbed.CreateConfigMap(t, e.members[i-1], e.ns, "synced", nil)
				fleettest.Eventually(t, 0, func() error {
					if position(member(i)+"/synced") < 0 {
						return fmt.Errorf("%s not synced yet", member(i))
					}
					return nil
				})
			}

			testbed.CreateConfigMap(t, e.members[0], e.ns, "flood", nil)
			// The backlog is queued (the queue's depth metric says so) and being worked on.
			fleettest.Eventually(t, 0, func() error {
				if d, _ := fleettest.Metric(t, "workqueue_depth", map[string]string{"name": e.ns}); d < flood/2 {
					return fmt.Errorf("queue depth %v, want the busy cluster's backlog", d)
				}
				if position(member(1)+"/busy-0") < 0 {
					return fmt.Errorf("the busy cluster's backlog is not being reconciled yet")
				}
				return nil
			})
			testbed.CreateConfigMap(t, e.members[1], e.ns, "quiet", nil)
			quiet := member(2) + "/quiet"
			fleettest.Eventually(t, 0, func() error {
				if position(quiet) < 0 {
					return fmt.Errorf("%s not reconciled yet", quiet)
				}
				return nil
			})
			mu.Lock()
			busyBefore := countBusy(order[:slices.Index(order, quiet)])
			queuedAt := busyAtQuiet
			mu.Unlock()
			t.Logf("%d of %d busy requests reconciled before the quiet one, %d when it was queued", busyBefore, flood, queuedAt)
			// Once queued, the quiet request waits for the busy request in
			// progress and the rest of the busy cluster's turn (one request),
			// so 2; the bound leaves room for the handler being descheduled
			// between the map func and its Add on a loaded machine (a plain
			// queue would make it wait for all the other ~1,990).
			if fair && busyBefore-queuedAt > 50 {
				t.Errorf("quiet request waited behind %d busy requests after it was queued, want about 2", busyBefore-queuedAt)
			}
			if !fair && busyBefore != flood {
				t.Errorf("without the fair queue the quiet request came after %d busy requests, want all %d", busyBefore, flood)
			}
		})
	}
}

func countBusy(order []string) int {
	n := 0
	for _, name := range order {
		if strings.HasPrefix(name, member(1)+"/busy-") {
			n++
		}
	}
	return n
}
