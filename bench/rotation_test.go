package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// membersProvider publishes clusters through pkg/clusters.Members, as the
// kubeconfig, file and Cluster API providers do: what rotates in place is
// decided there.
type membersProvider struct {
	pkgclusters.View
	members *pkgclusters.Members
	started chan struct{}
}

func newMembersProvider(opts ...func(*pkgclusters.Members)) *membersProvider {
	m := &pkgclusters.Members{}
	for _, o := range opts {
		o(m)
	}
	return &membersProvider{View: m.View(), members: m, started: make(chan struct{})}
}

func (p *membersProvider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.members.Start(ctx, aware, logr.Discard())
	close(p.started)
	<-ctx.Done()
	p.members.Wait()
	return nil
}

// BenchmarkRotation rotates the bearer token of every cluster of a fleet at
// once: N clusters (1,000; ROTATION_CLUSTERS=N sets another count) on the
// benchmark's API server, 20 ConfigMaps each, one controller reconciling
// them from its cache, published through clusters.Members from a config
// holding a ServiceAccount token. "rotation" gives each a new token for the
// same server and CA, which Members rotates in place; "rebuild" gives each a
// new token and another user agent, which changes where the cluster is
// reached from and so builds it again, as main did for any change of a
// kubeconfig before tokens rotated in place. Each line reports, for the
// fleet: LISTs (LIST requests and watch-lists of ConfigMaps the API server
// answered, from its metrics, counted 5 s after the last cluster got its
// token, so that a rebuild in the background would show), reconciles and
// engagements in the same window, ms-cpu (the process's CPU from the first
// Set until every cluster serves the new token; for the rebuild, until every
// ConfigMap was reconciled again by the new clusters) and KB-heap (live heap
// after, less before). The rotation line adds cpu-ratio, its CPU over the
// rebuild's of the same round. ROTATION_ROUNDS=k runs k rounds, alternating
// which side goes first. Skipped by -short.
func BenchmarkRotation(b *testing.B) {
	n := 1000
	if s := os.Getenv("ROTATION_CLUSTERS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("ROTATION_CLUSTERS=%q: want a count of at least 1", s)
		}
	}
	rounds := 1
	if s := os.Getenv("ROTATION_ROUNDS"); s != "" {
		var err error
		if rounds, err = strconv.Atoi(s); err != nil || rounds < 1 {
			b.Fatalf("ROTATION_ROUNDS=%q: want a count of at least 1", s)
		}
	}
	if testing.Short() {
		b.Skip("a thousand clusters engaged and rebuilt take minutes; skipped by -short")
	}
	ns := seed(b, objectsPerCluster)
	b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
		f := newRotationFleet(b, n, ns)
		defer f.stop()
		for r := range rounds {
			sides := []string{"rotation", "rebuild"}
			if r%2 == 1 {
				sides = []string{"rebuild", "rotation"}
			}
			results := map[string]rotationResult{}
			for _, side := range sides {
				results[side] = f.rotate(b, side == "rebuild")
			}
			rot, reb := results["rotation"], results["rebuild"]
			suffix := ""
			if rounds > 1 {
				suffix = fmt.Sprintf("-round%d", r+1)
			}
			report(b, "rotation"+suffix, append(rot.figures(), figure{rot.cpu.Seconds() / reb.cpu.Seconds(), "cpu-ratio"})...)
			report(b, "rebuild"+suffix, reb.figures()...)
		}
	})
}

type rotationResult struct {
	lists, reconciles, engagements float64
	cpu                            time.Duration
	heap                           int64
}

func (r rotationResult) figures() []figure {
	return []figure{
		{r.lists, "LISTs"}, {r.reconciles, "reconciles"}, {r.engagements, "engagements"},
		{float64(r.cpu) / float64(time.Millisecond), "ms-cpu"}, {float64(r.heap) / 1024, "KB-heap"},
	}
}

// rotationFleet is N clusters engaged through Members, and the tokens they
// take turns with.
type rotationFleet struct {
	n         int
	p         *membersProvider
	counter   *fleetCounter
	tracker   *fleettest.Tracker
	tokens    [2]string
	turn      int // index of the token the clusters hold
	userAgent int // bumped by every rebuild
	stop      func()
}

func newRotationFleet(b *testing.B, n int, ns string) *rotationFleet {
	f := &rotationFleet{n: n, counter: &fleetCounter{}, tracker: fleettest.NewTracker()}
	f.tokens[0], f.tokens[1] = serviceAccountToken(b, ns), serviceAccountToken(b, ns)
	f.p = newMembersProvider(func(m *pkgclusters.Members) { m.ClusterOptions = append(m.ClusterOptions, inNamespace(ns)) })
	mgr := newManager(b, f.p)
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("rotation-%d", nsCounter.Add(1))).For(&corev1.ConfigMap{}).
		Complete(cachedGetReconciler(mgr, func(r mcreconcile.Request) { f.counter.record(string(r.ClusterName)) })); err != nil {
		b.Fatal(err)
	}
	if err := mgr.Add(f.tracker); err != nil {
		b.Fatal(err)
	}
	f.stop = run(b, mgr)
	<-f.p.started
	for i := range n {
		f.p.members.Set(f.name(i), f.hash(), f.config(), nil)
	}
	want := int64(n * objectsPerCluster)
	if !pollLong(func() bool { return f.counter.total.Load() >= want }) {
		b.Fatalf("timed out waiting for every reconcile: %d of %d", f.counter.total.Load(), want)
	}
	return f
}

func (f *rotationFleet) name(i int) string { return fmt.Sprintf("r%05d", i) }
func (f *rotationFleet) hash() string      { return fmt.Sprintf("token-%d/ua-%d", f.turn, f.userAgent) }

// config is the benchmark server with the current token (and, once rebuilt,
// a user agent of its own).
func (f *rotationFleet) config() *rest.Config {
	full := config()
	cfg := &rest.Config{Host: full.Host, BearerToken: f.tokens[f.turn], QPS: full.QPS, Burst: full.Burst,
		TLSClientConfig: rest.TLSClientConfig{CAData: full.CAData}}
	if f.userAgent > 0 {
		cfg.UserAgent = fmt.Sprintf("rotation-benchmark/%d", f.userAgent)
	}
	return cfg
}

// rotate gives every cluster the other token at once (and, for a rebuild,
// another user agent) and measures what it cost.
func (f *rotationFleet) rotate(b *testing.B, rebuild bool) rotationResult {
	f.turn = 1 - f.turn
	if rebuild {
		f.userAgent++
	}
	cfg, hash := f.config(), f.hash()
	lists0, reconciles0, engaged0 := f.lists(b), f.counter.total.Load(), f.engagements()
	heap0, _ := heapAndGoroutines()
	begin, cpu0 := time.Now(), processCPU()
	for i := range f.n {
		f.p.members.Set(f.name(i), hash, cfg, nil)
	}
	if rebuild {
		want := reconciles0 + int64(f.n*objectsPerCluster)
		if !pollLong(func() bool { return f.counter.total.Load() >= want && f.engagements()-engaged0 >= f.n }) {
			b.Fatalf("timed out waiting for the rebuilt clusters: %d of %d reconciles", f.counter.total.Load()-reconciles0, f.n*objectsPerCluster)
		}
	}
	waitForLong(b, "every cluster on the new token", func() bool { return f.serving(cfg) })
	r := rotationResult{cpu: processCPU() - cpu0}
	b.Logf("%s of %d clusters: %s", map[bool]string{false: "rotation", true: "rebuild"}[rebuild], f.n, time.Since(begin))
	// What the rotation set off in the background shows within seconds.
	time.Sleep(5 * time.Second)
	heap1, _ := heapAndGoroutines()
	r.heap = int64(heap1) - int64(heap0)
	r.lists = f.lists(b) - lists0
	r.reconciles = float64(f.counter.total.Load() - reconciles0)
	r.engagements = float64(f.engagements() - engaged0)
	return r
}

// serving reports whether every engaged cluster holds cfg's token and user
// agent, and all n are engaged.
func (f *rotationFleet) serving(cfg *rest.Config) bool {
	engaged := f.tracker.Engaged()
	if len(engaged) < f.n {
		return false
	}
	for _, cl := range engaged {
		if c := cl.GetConfig(); c.BearerToken != cfg.BearerToken || (cfg.UserAgent != "" && c.UserAgent != cfg.UserAgent) {
			return false
		}
	}
	return true
}

func (f *rotationFleet) engagements() int {
	total := 0
	for i := range f.n {
		total += f.tracker.Count(f.name(i))
	}
	return total
}

// lists returns the LISTs and watch-lists of ConfigMaps the API server
// answered so far, from its metrics.
func (f *rotationFleet) lists(b *testing.B) float64 {
	return testbed.ListsServed(b, config(), "configmaps")
}

// serviceAccountToken returns a token of a ServiceAccount that may read
// ConfigMaps (an hour long, bound to a Secret of its own).
func serviceAccountToken(b *testing.B, ns string) string {
	ctx := context.Background()
	c, err := client.New(config(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rotation"}}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sa), sa); err != nil {
		for _, obj := range []client.Object{
			sa,
			// The caches list across namespaces, with a field selector.
			&rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: ns + "-rotation"},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
			},
			&rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: ns + "-rotation"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: ns + "-rotation"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "rotation"}},
			},
		} {
			if err := c.Create(ctx, obj); err != nil {
				b.Fatal(err)
			}
		}
	}
	return testbed.BoundToken(b, c, ns, "rotation", fmt.Sprintf("rotation-token-%d", nsCounter.Add(1)))
}
