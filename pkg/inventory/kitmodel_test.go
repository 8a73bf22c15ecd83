package inventory

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// The kit's model checker drives one kit, with several workers as the host
// manager's MaxConcurrentReconciles gives it, through random schedules of
// inventory objects created, renamed (pointed at another cluster name) and
// deleted, and checks, whenever the schedule is quiet, that:
//
//   - the engine holds exactly what the provider decided last: a member for
//     each name an object holds, with that object's content, and no other;
//   - one name, one source, and no name lost: a name that some object asks
//     for is held by one of the objects asking for it.
//
// The kit's cache and the engine are stand-ins (pure logic: the kit's names,
// clusters.Members and the order of their calls); the kit's tests against
// real API servers cover the rest. The stand-in engine takes a random moment
// to record each call, as the real one does when its lock is busy.
//
// A failing seed prints itself; rerun it alone with
// go test -run TestKitModel ./pkg/inventory/ -kitmodel.seed=N.
var kitModelSeed = flag.Uint64("kitmodel.seed", 0, "run the kit's model checker with this seed only")

func TestKitModel(t *testing.T) {
	seeds := uint64(40)
	if *kitModelSeed != 0 {
		runKitModel(t, *kitModelSeed)
		return
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		if !runKitModel(t, seed) {
			return
		}
	}
}

// inventoryCache serves the kit's Get from the model's objects.
type inventoryCache struct {
	cache.Cache // not called: any other method panics
	mu          sync.Mutex
	objs        map[client.ObjectKey]*corev1.ConfigMap
}

func (c *inventoryCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.objs[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
	}
	o.DeepCopyInto(obj.(*corev1.ConfigMap))
	return nil
}

func (c *inventoryCache) set(key client.ObjectKey, cluster string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objs[key] = &corev1.ConfigMap{Data: map[string]string{"cluster": cluster}}
	c.objs[key].Namespace, c.objs[key].Name = key.Namespace, key.Name
}

func (c *inventoryCache) delete(key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.objs, key)
}

// asking returns which objects ask for each name.
func (c *inventoryCache) asking() map[string][]client.ObjectKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]client.ObjectKey{}
	for key, o := range c.objs {
		out[o.Data["cluster"]] = append(out[o.Data["cluster"]], key)
	}
	return out
}

// recordingEngine is a fleet.Publisher that records, per name, the hash of
// the member it holds; each call takes a random moment before it lands.
type recordingEngine struct {
	mu      sync.Mutex
	members map[multicluster.ClusterName]string
	seed    atomic.Uint64
}

func (r *recordingEngine) pause() {
	n := r.seed.Add(1)
	if rand.New(rand.NewPCG(n, n)).IntN(2) == 0 {
		time.Sleep(100 * time.Microsecond)
	}
}

func (r *recordingEngine) SetMember(m fleet.Member) {
	r.pause()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.members[m.Name] = m.Hash
}

func (r *recordingEngine) RemoveMember(name multicluster.ClusterName) {
	r.pause()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.members, name)
}

func (r *recordingEngine) Lookup(multicluster.ClusterName) (cluster.Cluster, bool) { return nil, false }

func (r *recordingEngine) Engage(context.Context, multicluster.ClusterName, cluster.Cluster) error {
	return errors.New("the model's engine takes members only")
}

func (r *recordingEngine) held() map[multicluster.ClusterName]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[multicluster.ClusterName]string, len(r.members))
	for k, v := range r.members {
		out[k] = v
	}
	return out
}

// discardEvents is an EventRecorder that drops every Event.
type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}
func (discardEvents) AnnotatedEventf(runtime.Object, runtime.Object, map[string]string, string, string, string, string, ...any) {
}

func contentHash(key client.ObjectKey, name string) string { return key.String() + "->" + name }

func runKitModel(t *testing.T, seed uint64) (ok bool) {
	t.Helper()
	defer func() {
		if !ok {
			t.Logf("the kit's model checker failed with seed %d; rerun alone: go test -race -run TestKitModel ./pkg/inventory/ -kitmodel.seed=%d", seed, seed)
		}
	}()
	rng := rand.New(rand.NewPCG(seed, seed))
	inv := &inventoryCache{objs: map[client.ObjectKey]*corev1.ConfigMap{}}
	engine := &recordingEngine{members: map[multicluster.ClusterName]string{}}
	engine.seed.Store(seed * 1000)

	k := New(Options[*corev1.ConfigMap]{Name: "model", Object: &corev1.ConfigMap{},
		Desire: func(_ context.Context, _ client.Reader, cm *corev1.ConfigMap) (Desired, error) {
			name := cm.Data["cluster"]
			key := client.ObjectKeyFromObject(cm)
			// Published under the kit's hash, which the model checks (the
			// engine tells a rotation from a rebuild: see the fleet's model).
			cfg := &rest.Config{Host: "https://" + name, WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return rt }}
			return Desired{Name: name, Config: cfg, Hash: contentHash(key, name)}, nil
		}})
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Millisecond, 10*time.Millisecond))
	k.caches, k.kind, k.recorder, k.queue = []cache.Cache{inv}, "ConfigMap", discardEvents{}, queue
	ctx, cancel := context.WithCancel(context.Background())
	k.members.Start(ctx, engine, logr.Discard())
	close(k.started)

	// Workers as controller-runtime runs them: one key at a time each, never
	// one key on two workers at once.
	var busy atomic.Int32
	var workers sync.WaitGroup
	for range 4 {
		workers.Go(func() {
			for {
				req, shutdown := queue.Get()
				if shutdown {
					return
				}
				busy.Add(1)
				if _, err := k.Reconcile(ctx, req); err != nil {
					queue.AddRateLimited(req)
				} else {
					queue.Forget(req)
				}
				queue.Done(req)
				busy.Add(-1)
			}
		})
	}
	defer func() {
		queue.ShutDown()
		workers.Wait()
		cancel()
	}()

	keys := []client.ObjectKey{{Namespace: "inv", Name: "o1"}, {Namespace: "inv", Name: "o2"}, {Namespace: "inv", Name: "o3"}, {Namespace: "inv", Name: "o4"}}
	names := []string{"a", "b", "c"}
	quiet := func() error {
		if queue.Len() > 0 || busy.Load() > 0 {
			return errors.New("still reconciling")
		}
		held := engine.held()
		k.mu.Lock()
		holder := make(map[multicluster.ClusterName]client.ObjectKey, len(k.holder))
		for n, key := range k.holder {
			holder[n] = key
		}
		k.mu.Unlock()
		for name, key := range holder {
			if got, want := held[name], contentHash(key, name); got != want {
				return fmt.Errorf("the kit gives %s to %s, the engine holds %q for it", name, key, got)
			}
		}
		for name, hash := range held {
			if _, ok := holder[name]; !ok {
				return fmt.Errorf("the engine holds %s (%s), which no object holds", name, hash)
			}
		}
		for name, askers := range inv.asking() {
			if _, ok := holder[name]; !ok {
				return fmt.Errorf("%v ask for %s, which nobody holds", askers, name)
			}
		}
		return nil
	}
	var trace []string
	for step := range 200 {
		key := keys[rng.IntN(len(keys))]
		if rng.IntN(4) == 0 {
			inv.delete(key)
			trace = append(trace, fmt.Sprintf("step %d: delete %s", step, key))
		} else {
			name := names[rng.IntN(len(names))]
			inv.set(key, name)
			trace = append(trace, fmt.Sprintf("step %d: %s names %s", step, key, name))
		}
		queue.Add(reconcile.Request{NamespacedName: key})
		if rng.IntN(3) == 0 {
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		}
		if step%20 == 19 {
			if err := waitUntil(5*time.Second, quiet); err != nil {
				from := max(0, len(trace)-30)
				t.Errorf("seed %d, step %d: %v\nlast steps:\n%v", seed, step, err, trace[from:])
				return false
			}
		}
	}
	return true
}

// waitUntil polls cond until it returns nil or timeout passes.
func waitUntil(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
}
