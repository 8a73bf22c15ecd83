package fleettest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Recorder is a reconciler that counts the requests it sees, optionally only
// those of one namespace, and returns what Result says. The zero value records
// every request and succeeds.
type Recorder struct {
	// Namespace, if set, makes the recorder ignore (and succeed on) requests for
	// other namespaces, so that tests sharing clusters stay independent.
	Namespace string
	// Result, if set, decides the outcome of each recorded request.
	Result func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error)

	mu     sync.Mutex
	counts map[mcreconcile.Request]int
}

var _ mcreconcile.Reconciler = &Recorder{}

// Reconcile records req.
func (r *Recorder) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	if r.Namespace != "" && req.Namespace != r.Namespace {
		return reconcile.Result{}, nil
	}
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[mcreconcile.Request]int{}
	}
	r.counts[req]++
	r.mu.Unlock()
	if r.Result != nil {
		return r.Result(ctx, req)
	}
	return reconcile.Result{}, nil
}

// Count returns how often the request for cluster/namespace/name was seen.
func (r *Recorder) Count(cluster, namespace, name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[Request(cluster, namespace, name)]
}

// Counts returns a copy of every count.
func (r *Recorder) Counts() map[mcreconcile.Request]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts)
}

// WaitFor waits until the request has been seen at least n times, for
// DefaultTimeout at most.
func (r *Recorder) WaitFor(t testing.TB, n int, cluster, namespace, name string) {
	t.Helper()
	Eventually(t, 0, func() error {
		if got := r.Count(cluster, namespace, name); got < n {
			return fmt.Errorf("%s reconciled %d times, want at least %d (seen: %v)", Request(cluster, namespace, name), got, n, r.Counts())
		}
		return nil
	})
}

// Request builds the request for the object namespace/name in cluster.
func Request(cluster, namespace, name string) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: cluster, Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}
