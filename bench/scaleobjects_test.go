package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// BenchmarkScaleObjects is BenchmarkScale with what a member of a real fleet
// holds: OBJECTS_CLUSTERS clusters (default 1,000) on one real API server,
// each caching OBJECTS_CONFIGMAPS ConfigMaps (default 200) and
// OBJECTS_DEPLOYMENTS Deployments (default 50) written with server-side
// apply, so that they carry the managed fields a real fleet's objects carry.
// The library's side is a manager with one controller per type, each
// reconciling with a cached Get, over clusters built by NewCluster with its
// defaults (managed fields and kubectl's last applied configuration
// dropped); the floor is bare client-go informers with client-go's defaults
// (two per cluster, no transform), their events reconciled by 16 workers
// from one workqueue with a read of the cluster's informer cache, in the
// same process. Both sides wait for idle before they start, and alternate
// over SCALE_ROUNDS rounds, as BenchmarkScale's do.
//
// Each side is measured in two phases. Sync, from before its clients are
// built until every object of every cluster is reconciled: s/all-reconciled,
// ms-cpu/cluster, µs-cpu/object, then KB-heap/cluster and B-heap/object (the
// live heap added, after two GCs, per cluster and per cached object) and
// goroutines/cluster. Events: every ConfigMap is applied again with one
// value changed (by a client of its own, outside the measured transport), and
// each side reconciles every cluster's update: µs-cpu/event (the process's
// CPU from the first write until every update is reconciled, per update
// event, the writes' own CPU included and the same on both sides) and
// s/events. The multicluster line adds the ratios to the floor of the same
// round: time-ratio, cpu-ratio (sync), heap-ratio and event-cpu-ratio.
//
// Skipped by -short. The default (1,000 × 250, one round) takes a few
// minutes; OBJECTS_CLUSTERS=10000 OBJECTS_CONFIGMAPS=20 OBJECTS_DEPLOYMENTS=0
// is the 10,000-cluster variant.
func BenchmarkScaleObjects(b *testing.B) {
	if testing.Short() {
		b.Skip("a fleet of 1,000 clusters with 250 objects each takes minutes; skipped by -short")
	}
	spec := objectSpec{
		clusters:    envCount(b, "OBJECTS_CLUSTERS", 1000),
		configMaps:  envCount(b, "OBJECTS_CONFIGMAPS", 200),
		deployments: envCount(b, "OBJECTS_DEPLOYMENTS", 50),
	}
	if spec.clusters == 0 || spec.configMaps == 0 {
		b.Fatal("OBJECTS_CLUSTERS and OBJECTS_CONFIGMAPS must be at least 1")
	}
	rounds := scaleRounds(b)
	w := newObjectWriter(b)
	defer w.close()
	spec.ns = w.seed(b, spec)
	b.Run(fmt.Sprintf("objects=%dx%d", spec.clusters, spec.perCluster()), func(b *testing.B) {
		warmGoroutines(16 * spec.clusters)
		idle := idleBaseline(b)
		var mc, floor objectsResult
		alternateRounds(b, rounds, idle,
			func(round int) { mc = objectsMultiCluster(b, spec, w, round) },
			func(round int) { floor = objectsFloor(b, spec, w, round) },
			func() ([]figure, []figure) { return mc.besideFloor(spec, floor), floor.figures(spec) })
	})
}

// envCount reads a count of at least 0 from the environment, or def.
func envCount(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a count", name, s)
	}
	return n
}

// objectSpec is what every cluster of BenchmarkScaleObjects holds.
type objectSpec struct {
	clusters, configMaps, deployments int
	ns                                string
}

func (s objectSpec) perCluster() int { return s.configMaps + s.deployments }
func (s objectSpec) objects() int    { return s.clusters * s.perCluster() }

type objectsResult struct {
	all        time.Duration // start to every object reconciled
	cpu        time.Duration // process CPU over all
	heap       int64         // live heap added, bytes
	goroutines int
	events     time.Duration // first update written to every update reconciled
	eventCPU   time.Duration // process CPU over events
}

func (r objectsResult) figures(s objectSpec) []figure {
	n, objects := float64(s.clusters), float64(s.objects())
	return []figure{
		{r.all.Seconds(), "s/all-reconciled"},
		{float64(r.cpu.Microseconds()) / 1000 / n, "ms-cpu/cluster"},
		{float64(r.cpu.Microseconds()) / objects, "µs-cpu/object"},
		{float64(r.heap) / 1024 / n, "KB-heap/cluster"},
		{float64(r.heap) / objects, "B-heap/object"},
		{float64(r.goroutines) / n, "goroutines/cluster"},
		{float64(r.eventCPU.Microseconds()) / float64(s.clusters*s.configMaps), "µs-cpu/event"},
		{r.events.Seconds(), "s/events"},
	}
}

func (r objectsResult) besideFloor(s objectSpec, floor objectsResult) []figure {
	return append(r.figures(s),
		figure{r.all.Seconds() / floor.all.Seconds(), "time-ratio"},
		figure{r.cpu.Seconds() / floor.cpu.Seconds(), "cpu-ratio"},
		figure{float64(r.heap) / float64(floor.heap), "heap-ratio"},
		figure{r.eventCPU.Seconds() / floor.eventCPU.Seconds(), "event-cpu-ratio"},
	)
}

// objectsMultiCluster is the library's side: a manager over clusters built
// by NewCluster with its defaults, a controller per type.
func objectsMultiCluster(b *testing.B, s objectSpec, w *objectWriter, round int) objectsResult {
	p := clustersprovider.New()
	mgr := newManager(b, p)
	var total atomic.Int64
	count := func(mcreconcile.Request) { total.Add(1) }
	id := nsCounter.Add(1)
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("objects-cm-%d", id)).For(&corev1.ConfigMap{}).
		Complete(cachedGetReconciler(mgr, count)); err != nil {
		b.Fatal(err)
	}
	if s.deployments > 0 {
		if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("objects-deploy-%d", id)).For(&appsv1.Deployment{}).
			Complete(cachedGetOf(mgr, &appsv1.Deployment{}, count)); err != nil {
			b.Fatal(err)
		}
	}
	heap0, _ := heapAndGoroutines()
	stopProfile := cpuProfile(b, fmt.Sprintf("objects-multicluster-%d-round%d", s.clusters, round))
	defer stopProfile()
	begin, cpu0 := time.Now(), processCPU()
	for i := range s.clusters {
		cl, err := pkgclusters.NewCluster(config(), inNamespace(s.ns))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Add(context.Background(), fmt.Sprintf("o%05d", i), cl); err != nil {
			b.Fatal(err)
		}
	}
	g0 := runtime.NumGoroutine()
	stop := run(b, mgr)
	defer stop()
	return measured(b, s, w, side{name: "multicluster", begin: begin, cpu0: cpu0, heap0: heap0, g0: g0, done: total.Load, stopProfile: stopProfile})
}

// side is what one side of BenchmarkScaleObjects started from.
type side struct {
	name        string
	begin       time.Time
	cpu0        time.Duration
	heap0       uint64
	g0          int
	done        func() int64 // reconciles so far
	stopProfile func()
}

// measured waits until every object is reconciled and measures the side's
// sync, then its update events.
func measured(b *testing.B, s objectSpec, w *objectWriter, sd side) objectsResult {
	want := int64(s.objects())
	waitForLong(b, "every reconcile", func() bool { return sd.done() >= want })
	r := objectsResult{all: time.Since(sd.begin), cpu: processCPU() - sd.cpu0}
	sd.stopProfile()
	heap1, g1 := heapAndGoroutines()
	r.heap, r.goroutines = int64(heap1)-int64(sd.heap0), g1-sd.g0
	writeProfiles(b, fmt.Sprintf("objects-%s-%d", sd.name, s.clusters))
	r.events, r.eventCPU = w.updateAll(b, s, func() bool { return sd.done() >= want+int64(s.clusters*s.configMaps) })
	return r
}

// cachedGetOf reconciles with a cached Get of an object of obj's type.
func cachedGetOf(mgr mcmanager.Manager, obj client.Object, count func(mcreconcile.Request)) mcreconcile.Reconciler {
	return mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		cl, err := mgr.GetCluster(ctx, req.ClusterName)
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := cl.GetClient().Get(ctx, req.NamespacedName, obj.DeepCopyObject().(client.Object)); err != nil {
			return reconcile.Result{}, err
		}
		count(req)
		return reconcile.Result{}, nil
	})
}

// objectsFloor is the same work with bare client-go and its defaults: per
// cluster an informer per type, with the same field selector and no
// transform.
func objectsFloor(b *testing.B, s objectSpec, w *objectWriter, round int) objectsResult {
	var done atomic.Int64
	heap0, g0 := heapAndGoroutines()
	stopProfile := cpuProfile(b, fmt.Sprintf("objects-client-go-%d-round%d", s.clusters, round))
	defer stopProfile()
	begin, cpu0 := time.Now(), processCPU()
	ctx, cancel := context.WithCancel(context.Background())
	q := workqueue.NewTyped[floorKey]()
	informers := make([]informerPair, s.clusters)
	selector := func(o *metav1.ListOptions) { o.FieldSelector = "metadata.namespace=" + s.ns }
	var started sync.WaitGroup
	for i := range s.clusters {
		started.Go(func() {
			start := func(lw toolscache.ListerWatcher, obj kruntime.Object, deployment bool) toolscache.SharedIndexInformer {
				return startFloorInformer(b, ctx, q, lw, obj, i, deployment, nil)
			}
			core, err := corev1client.NewForConfig(config())
			if err != nil {
				b.Error(err)
				return
			}
			informers[i].cms = start(toolscache.NewFilteredListWatchFromClient(core.RESTClient(), "configmaps", metav1.NamespaceAll, selector), &corev1.ConfigMap{}, false)
			if s.deployments > 0 {
				apps, err := appsv1client.NewForConfig(config())
				if err != nil {
					b.Error(err)
					return
				}
				informers[i].deps = start(toolscache.NewFilteredListWatchFromClient(apps.RESTClient(), "deployments", metav1.NamespaceAll, selector), &appsv1.Deployment{}, true)
			}
		})
	}
	started.Wait()
	stopWorkers := floorWorkers(q, informers, &done)
	defer func() {
		cancel()
		stopWorkers()
	}()
	return measured(b, s, w, side{name: "client-go", begin: begin, cpu0: cpu0, heap0: heap0, g0: g0, done: done.Load, stopProfile: stopProfile})
}

// floorKey is a request of the floor's workqueue: a cluster's ConfigMap or
// Deployment.
type floorKey struct {
	cluster    int
	deployment bool
	types.NamespacedName
}

// startFloorInformer runs an informer of the floor for cluster i, its events
// queued to q as floorKeys, transform (if not nil) applied to what it stores.
func startFloorInformer(b *testing.B, ctx context.Context, q workqueue.TypedInterface[floorKey], lw toolscache.ListerWatcher,
	obj kruntime.Object, i int, deployment bool, transform toolscache.TransformFunc) toolscache.SharedIndexInformer {
	inf := toolscache.NewSharedIndexInformer(lw, obj, 0, toolscache.Indexers{})
	if transform != nil {
		_ = inf.SetTransform(transform)
	}
	enqueue := func(obj any) {
		if o, ok := obj.(metav1.Object); ok {
			q.Add(floorKey{i, deployment, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		b.Error(err)
	}
	go inf.Run(ctx.Done())
	return inf
}

// informerPair is a cluster's informers on the floor's side.
type informerPair struct {
	cms, deps toolscache.SharedIndexInformer
}

// floorWorkers starts the floor's 16 workers: each takes a request from q,
// reads the object from its cluster's informer store and counts it in done.
// The returned function shuts q down and waits for them.
func floorWorkers(q workqueue.TypedInterface[floorKey], informers []informerPair, done *atomic.Int64) (stop func()) {
	var workers sync.WaitGroup
	for range 16 {
		workers.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				inf := informers[k.cluster].cms
				if k.deployment {
					inf = informers[k.cluster].deps
				}
				if _, ok, err := inf.GetIndexer().GetByKey(k.Namespace + "/" + k.Name); err == nil && ok {
					done.Add(1)
				}
				q.Done(k)
			}
		})
	}
	return func() {
		q.ShutDown()
		workers.Wait()
	}
}

// objectWriter writes the benchmark's objects with server-side apply, over
// a transport of its own (see seed), closed at the end.
type objectWriter struct {
	c     client.Client
	hc    func()
	round atomic.Int32
}

func newObjectWriter(b *testing.B) *objectWriter {
	cfg := config()
	cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{HTTPClient: hc})
	if err != nil {
		b.Fatal(err)
	}
	return &objectWriter{c: c, hc: func() { utilnet.CloseIdleConnectionsFor(hc.Transport) }}
}

// close closes the writer's idle connections.
func (w *objectWriter) close() { w.hc() }

// seed creates a namespace holding the spec's objects, applied, and returns
// its name. Between sides, closeIdleConnections does not reach the writer's
// transport: its connection stays open, in the idle baseline.
func (w *objectWriter) seed(b *testing.B, s objectSpec) string {
	ns := fmt.Sprintf("bench-objects-%d", nsCounter.Add(1))
	if err := w.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	w.applyEach(b, s.configMaps, func(i int) error { return w.c.Apply(context.Background(), appliedConfigMap(ns, i, "v0"), fieldOwner) })
	w.applyEach(b, s.deployments, func(i int) error { return w.c.Apply(context.Background(), appliedDeployment(ns, i), fieldOwner) })
	return ns
}

var fieldOwner = client.FieldOwner("bench-writer")

// updateAll applies every ConfigMap again with a new value and returns the
// time and the process's CPU until reconciled says every update was.
func (w *objectWriter) updateAll(b *testing.B, s objectSpec, reconciled func() bool) (time.Duration, time.Duration) {
	value := fmt.Sprintf("v%d", w.round.Add(1))
	begin, cpu0 := time.Now(), processCPU()
	w.applyEach(b, s.configMaps, func(i int) error {
		return w.c.Apply(context.Background(), appliedConfigMap(s.ns, i, value), fieldOwner)
	})
	waitForLong(b, "every update's reconcile", reconciled)
	return time.Since(begin), processCPU() - cpu0
}

// applyEach calls apply for 0..n-1 from 8 goroutines.
func (w *objectWriter) applyEach(b *testing.B, n int, apply func(i int) error) {
	var wg sync.WaitGroup
	var failed atomic.Value
	var next atomic.Int32
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				// A busy API server may drop the writer's connection (seen
				// once at 1,000 clusters): the write is retried on a new one.
				err := apply(i)
				for attempt := 1; err != nil && attempt < 5; attempt++ {
					time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
					err = apply(i)
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
}

// appliedConfigMap is a ConfigMap as a team's configuration would be:
// labels and five settings; version is one of them.
func appliedConfigMap(ns string, i int, version string) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(fmt.Sprintf("config-%d", i), ns).
		WithLabels(map[string]string{"app.kubernetes.io/name": fmt.Sprintf("app-%d", i%40), "app.kubernetes.io/part-of": "bench", "team": fmt.Sprintf("team-%d", i%5)}).
		WithData(map[string]string{
			"version":      version,
			"log-level":    "info",
			"endpoint":     fmt.Sprintf("https://service-%d.example.internal:8443/api/v1", i),
			"feature-flag": "alpha=false,beta=true,gamma=false",
			"timeout":      "30s",
		})
}

// appliedDeployment is a Deployment as a team's would be: one container
// with ports, environment, resources and a readiness probe.
func appliedDeployment(ns string, i int) *appsv1ac.DeploymentApplyConfiguration {
	name := fmt.Sprintf("app-%d", i)
	labels := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench"}
	return appsv1ac.Deployment(name, ns).
		WithLabels(labels).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(2).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("app").
					WithImage(fmt.Sprintf("registry.example.com/team/%s:v1.%d.0", name, i%10)).
					WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(8080)).
					WithEnv(
						corev1ac.EnvVar().WithName("LOG_LEVEL").WithValue("info"),
						corev1ac.EnvVar().WithName("CONFIG").WithValue(fmt.Sprintf("config-%d", i)),
						corev1ac.EnvVar().WithName("REGION").WithValue("eu-west-1"),
					).
					WithResources(corev1ac.ResourceRequirements().
						WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}).
						WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")})).
					WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromInt32(8080)))),
				))))
}
