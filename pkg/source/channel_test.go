package source

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/engagements"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// controllerRecord is a controller's record of its engagements, as the
// controller hands it to the sources it starts.
type controllerRecord struct {
	mu      sync.Mutex
	started map[multicluster.ClusterName][]any
}

func (r *controllerRecord) StartedIn(name multicluster.ClusterName) []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started[name]
}

func (r *controllerRecord) set(name multicluster.ClusterName, srcs ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started[name] = srcs
}

// The channel source keeps no record of the clusters: it routes each event
// to its registration in the cluster the controller says it is engaged
// with, and drops the event once the controller no longer is, even while the
// registration's context has not ended yet.
func TestChannelAsksTheControllerWhichClustersAreEngaged(t *testing.T) {
	events := make(chan GenericEvent[client.Object])
	src := Channel(events, mchandler.EnqueueRequestForObject)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
	defer q.ShutDown()
	rec := &controllerRecord{started: map[multicluster.ClusterName][]any{}}
	ctx, cancel := context.WithCancel(engagements.With(context.Background(), rec))
	defer cancel()

	reg, _, err := src.ForCluster("member", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.set("member", reg)
	if err := reg.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	obj := &corev1.ConfigMap{}
	obj.Namespace, obj.Name = "ns", "cm"
	send := func(name multicluster.ClusterName) {
		select {
		case events <- GenericEvent[client.Object]{ClusterName: name, Object: obj}:
		case <-time.After(10 * time.Second):
			t.Fatal("nobody reads the channel")
		}
	}
	send("member")
	if got, _ := q.Get(); got.ClusterName != "member" || got.Name != "cm" {
		t.Fatalf("queued %v, want member/ns/cm", got)
	} else {
		q.Done(got)
	}

	// The controller lets go of the cluster; its context has not ended yet.
	rec.set("member")
	send("member")
	send("other") // the channel is read: the event before it was handled
	if n := q.Len(); n != 0 {
		t.Fatalf("%d events queued for a cluster the controller is not engaged with", n)
	}
}

// Started by anything but a multi-cluster controller, the channel source
// has nobody to ask where its events go, and says so.
func TestChannelStartedOutsideAControllerFails(t *testing.T) {
	src := Channel(make(chan GenericEvent[client.Object]), mchandler.EnqueueRequestForObject)
	reg, _, err := src.ForCluster("member", nil)
	if err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
	defer q.ShutDown()
	err = reg.Start(t.Context(), q)
	if err == nil || !strings.Contains(err.Error(), `"member"`) {
		t.Fatalf("Start outside a controller: %v, want an error naming the cluster", err)
	}
}
