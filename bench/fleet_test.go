package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// BenchmarkFleet measures one side against the fleet that bench/fleetsim
// serves (FLEET=its fleet.json; skipped without it): members that are each
// a different server, CA and ServiceAccount identity, each allowed to read
// its own namespace only, with ConfigMaps and Deployments that differ from
// member to member. fleetsim -drive runs each side in a process of its own,
// in rounds, and compares them (see bench/fleetsim and `make bench-fleet`);
// FLEET_SIDE picks the side:
//
//   - library: NewCluster per member (its defaults), added to a provider
//     before the manager starts; a controller per type, each reconciling
//     with a cached Get (16 workers).
//   - library-interned: library with string interning
//     (clusters.WithInternedStrings, off by default).
//   - adopted-serial, adopted-concurrent: the seeds' custom-provider path:
//     each member built with NewCluster and handed to a running manager with
//     Clusters.Add (start, wait for the cache, engage), one after another or
//     all at once.
//   - controller-runtime: library, with members built by controller-runtime's
//     cluster.New instead of NewCluster.
//   - client-go, client-go-serial: the floor: per member a clientset and an
//     informer per type (client-go's defaults, no transform), their events
//     reconciled by 16 workers from one workqueue with a read of the
//     member's informer cache; started all at once, or one after another
//     (each once the one before synced).
//   - client-go-tuned: client-go with what the library's caches do that bare
//     informers can do too: protobuf, no compressed responses, managed
//     fields dropped before an object is stored.
//
// Every cache lists and watches the member's namespace. The line
// (BenchmarkFleet/SIDE) has s/all-reconciled and ms-cpu/cluster (from
// before the first member's client is built until every object is
// reconciled), KB-heap/cluster (live heap added, after two GCs), goroutines/
// cluster, MB-maxrss, then µs-cpu/event and s/events: fleetsim changes every
// member's first Update ConfigMaps (its writes, not counted here) and the
// side reconciles each change.
func BenchmarkFleet(b *testing.B) {
	path := os.Getenv("FLEET")
	if path == "" {
		b.Skip("no FLEET: run by fleetsim -drive (make bench-fleet)")
	}
	f := loadFleet(b, path)
	sideName := os.Getenv("FLEET_SIDE")
	run, ok := fleetSides[sideName]
	if !ok {
		b.Fatalf("FLEET_SIDE=%q: no such side", sideName)
	}
	warmGoroutines(16 * len(f.members))
	r := run(b, f)
	report(b, sideName,
		figure{r.all.Seconds(), "s/all-reconciled"},
		figure{float64(r.cpu.Microseconds()) / 1000 / float64(len(f.members)), "ms-cpu/cluster"},
		figure{float64(r.heap) / 1024 / float64(len(f.members)), "KB-heap/cluster"},
		figure{float64(r.goroutines) / float64(len(f.members)), "goroutines/cluster"},
		figure{maxRSS(), "MB-maxrss"},
		figure{float64(r.eventCPU.Microseconds()) / float64(len(f.members)*f.Update), "µs-cpu/event"},
		figure{r.events.Seconds(), "s/events"},
	)
}

// simFleet is fleetsim's fleet.json, with each member's config loaded.
type simFleet struct {
	Control     string `json:"control"`
	Host        string `json:"host"`
	ConfigMaps  int    `json:"configMaps"`
	Deployments int    `json:"deployments"`
	Update      int    `json:"update"`
	Members     []struct {
		Name       string `json:"name"`
		Kubeconfig string `json:"kubeconfig"`
		Namespace  string `json:"namespace"`
	} `json:"members"`

	host    *rest.Config
	members []simMember
}

type simMember struct {
	name, namespace string
	config          *rest.Config
}

func loadFleet(b *testing.B, path string) *simFleet {
	body, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	f := &simFleet{}
	if err := json.Unmarshal(body, f); err != nil {
		b.Fatalf("%s: %v", path, err)
	}
	if f.host, err = clientcmd.BuildConfigFromFlags("", f.Host); err != nil {
		b.Fatal(err)
	}
	for _, m := range f.Members {
		cfg, err := clientcmd.BuildConfigFromFlags("", m.Kubeconfig)
		if err != nil {
			b.Fatal(err)
		}
		f.members = append(f.members, simMember{name: m.Name, namespace: m.Namespace, config: cfg})
	}
	return f
}

func (f *simFleet) perMember() int { return f.ConfigMaps + f.Deployments }

// update asks fleetsim to change every member's first Update ConfigMaps.
func (f *simFleet) update(b *testing.B) {
	resp, err := http.Post(f.Control+"/update", "text/plain", nil)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("fleetsim's update: %s", resp.Status)
	}
}

type fleetResult struct {
	all, cpu         time.Duration
	heap             int64
	goroutines       int
	events, eventCPU time.Duration
}

var fleetSides = map[string]func(*testing.B, *simFleet) fleetResult{
	"library": func(b *testing.B, f *simFleet) fleetResult { return fleetLibrary(b, f, pkgclusters.NewCluster) },
	"library-interned": func(b *testing.B, f *simFleet) fleetResult {
		return fleetLibrary(b, f, withOptions(pkgclusters.NewCluster, pkgclusters.WithInternedStrings()))
	},
	"controller-runtime": func(b *testing.B, f *simFleet) fleetResult { return fleetLibrary(b, f, cluster.New) },
	"adopted-serial":     func(b *testing.B, f *simFleet) fleetResult { return fleetAdopted(b, f, true) },
	"adopted-concurrent": func(b *testing.B, f *simFleet) fleetResult { return fleetAdopted(b, f, false) },
	"client-go":          func(b *testing.B, f *simFleet) fleetResult { return fleetFloor(b, f, false, false) },
	"client-go-serial":   func(b *testing.B, f *simFleet) fleetResult { return fleetFloor(b, f, true, false) },
	"client-go-tuned":    func(b *testing.B, f *simFleet) fleetResult { return fleetFloor(b, f, false, true) },
}

type buildFunc func(*rest.Config, ...cluster.Option) (cluster.Cluster, error)

func withOptions(build buildFunc, more ...cluster.Option) buildFunc {
	return func(cfg *rest.Config, opts ...cluster.Option) (cluster.Cluster, error) {
		return build(cfg, append(opts, more...)...)
	}
}

// inMemberNamespace restricts a member's cache to its namespace, all its
// identity may read.
func inMemberNamespace(ns string) cluster.Option {
	return func(o *cluster.Options) {
		o.Cache.DefaultNamespaces = map[string]crcache.Config{ns: {}}
		o.Logger = managerLogger()
	}
}

// fleetControllers registers a controller per type on mgr, counting into
// total.
func fleetControllers(b *testing.B, mgr mcmanager.Manager, f *simFleet, total *atomic.Int64) {
	count := func(mcreconcile.Request) { total.Add(1) }
	id := nsCounter.Add(1)
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("fleet-cm-%d", id)).For(&corev1.ConfigMap{}).
		Complete(cachedGetOf(mgr, &corev1.ConfigMap{}, count)); err != nil {
		b.Fatal(err)
	}
	if f.Deployments > 0 {
		if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("fleet-deploy-%d", id)).For(&appsv1.Deployment{}).
			Complete(cachedGetOf(mgr, &appsv1.Deployment{}, count)); err != nil {
			b.Fatal(err)
		}
	}
}

// fleetMCManager is a manager on the fleet's host (an administrator of
// fleetsim's first API server, used for nothing but the manager's own
// set-up), logging, metrics and probes off.
func fleetMCManager(b *testing.B, f *simFleet, provider multicluster.Provider) mcmanager.Manager {
	return newManagerOn(b, rest.CopyConfig(f.host), provider)
}

// fleetLibrary is the library's side: a provider that knows every member
// (built by build) before the manager starts.
func fleetLibrary(b *testing.B, f *simFleet, build buildFunc) fleetResult {
	p := clustersprovider.New()
	mgr := fleetMCManager(b, f, p)
	var total atomic.Int64
	fleetControllers(b, mgr, f, &total)
	heap0, _ := heapAndGoroutines()
	stopProfile := cpuProfile(b, "fleet-"+os.Getenv("FLEET_SIDE"))
	defer stopProfile()
	begin, cpu0 := time.Now(), processCPU()
	for _, m := range f.members {
		cl, err := build(m.config, inMemberNamespace(m.namespace))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Add(context.Background(), m.name, cl); err != nil {
			b.Fatal(err)
		}
	}
	g0 := runtime.NumGoroutine()
	stop := run(b, mgr)
	defer stop()
	return fleetMeasured(b, f, begin, cpu0, heap0, g0, total.Load, stopProfile)
}

// fleetAdopted is the seeds' custom-provider path on the fleet (see
// BenchmarkAdopted): a running manager, each member built with NewCluster
// and added with Clusters.Add, which starts it, waits for its cache and
// engages it.
func fleetAdopted(b *testing.B, f *simFleet, serial bool) fleetResult {
	p := &adoptingProvider{}
	mgr := fleetMCManager(b, f, p)
	var total atomic.Int64
	fleetControllers(b, mgr, f, &total)
	ctx, cancel := context.WithCancel(context.Background())
	stop := run(b, mgr)
	defer func() {
		cancel()
		stop()
	}()
	// The manager runs once a first cluster is engaged and reconciled; it
	// leaves before the measure. It is the first member, under another name.
	probe, err := pkgclusters.NewCluster(f.members[0].config, inMemberNamespace(f.members[0].namespace))
	if err != nil {
		b.Fatal(err)
	}
	probeCtx, removeProbe := context.WithCancel(ctx)
	if err := p.Add(probeCtx, "probe", probe, mgr); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "the probe's reconciles", func() bool { return total.Load() == int64(f.perMember()) })
	removeProbe()
	waitFor(b, "the probe to leave", func() bool { _, err := mgr.GetCluster(ctx, "probe"); return err != nil })
	total.Store(0)

	heap0, g0 := heapAndGoroutines()
	stopProfile := cpuProfile(b, "fleet-"+os.Getenv("FLEET_SIDE"))
	defer stopProfile()
	begin, cpu0 := time.Now(), processCPU()
	add := func(m simMember) error {
		cl, err := pkgclusters.NewCluster(m.config, inMemberNamespace(m.namespace))
		if err != nil {
			return err
		}
		return p.Add(ctx, m.name, cl, mgr)
	}
	if serial {
		for _, m := range f.members {
			if err := add(m); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		errs := make([]error, len(f.members))
		var wg sync.WaitGroup
		for i, m := range f.members {
			wg.Go(func() { errs[i] = add(m) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	return fleetMeasured(b, f, begin, cpu0, heap0, g0, total.Load, stopProfile)
}

// fleetMeasured waits until every object of every member is reconciled,
// measures, then has fleetsim update and measures the events.
func fleetMeasured(b *testing.B, f *simFleet, begin time.Time, cpu0 time.Duration, heap0 uint64, g0 int, done func() int64, stopProfile func()) fleetResult {
	want := int64(len(f.members) * f.perMember())
	waitForLong(b, "every reconcile", func() bool { return done() >= want })
	r := fleetResult{all: time.Since(begin), cpu: processCPU() - cpu0}
	stopProfile()
	heap1, g1 := heapAndGoroutines()
	r.heap, r.goroutines = int64(heap1)-int64(heap0), g1-g0
	writeProfiles(b, "fleet-"+os.Getenv("FLEET_SIDE"))
	want += int64(len(f.members) * f.Update)
	begin, cpu0 = time.Now(), processCPU()
	f.update(b)
	waitForLong(b, "every update's reconcile", func() bool { return done() >= want })
	r.events, r.eventCPU = time.Since(begin), processCPU()-cpu0
	return r
}

// fleetFloor is the floor on the fleet: bare client-go informers, one
// clientset per member and type, client-go's defaults.
// tuned does what NewCluster and controller-runtime's cache do beyond
// client-go's defaults that a user of bare informers can do too: protobuf
// instead of JSON, no compressed responses, and managed fields dropped
// before an object is stored.
func fleetFloor(b *testing.B, f *simFleet, serial, tuned bool) fleetResult {
	var done atomic.Int64
	heap0, g0 := heapAndGoroutines()
	stopProfile := cpuProfile(b, "fleet-"+os.Getenv("FLEET_SIDE"))
	defer stopProfile()
	begin, cpu0 := time.Now(), processCPU()
	ctx, cancel := context.WithCancel(context.Background())
	q := workqueue.NewTyped[floorKey]()
	informers := make([]informerPair, len(f.members))
	var started sync.WaitGroup
	for i, m := range f.members {
		start := func() {
			inform := func(lw toolscache.ListerWatcher, obj kruntime.Object, deployment bool) toolscache.SharedIndexInformer {
				var transform toolscache.TransformFunc
				if tuned {
					transform = crcache.TransformStripManagedFields()
				}
				return startFloorInformer(b, ctx, q, lw, obj, i, deployment, transform)
			}
			cfg := m.config
			if tuned {
				cfg = rest.CopyConfig(cfg)
				cfg.DisableCompression = true
				cfg.ContentType = "application/vnd.kubernetes.protobuf"
			}
			core, err := corev1client.NewForConfig(cfg)
			if err != nil {
				b.Error(err)
				return
			}
			informers[i].cms = inform(toolscache.NewListWatchFromClient(core.RESTClient(), "configmaps", m.namespace, fields.Everything()), &corev1.ConfigMap{}, false)
			if f.Deployments > 0 {
				apps, err := appsv1client.NewForConfig(cfg)
				if err != nil {
					b.Error(err)
					return
				}
				informers[i].deps = inform(toolscache.NewListWatchFromClient(apps.RESTClient(), "deployments", m.namespace, fields.Everything()), &appsv1.Deployment{}, true)
			}
		}
		if !serial {
			started.Go(start)
			continue
		}
		start()
		for _, inf := range []toolscache.SharedIndexInformer{informers[i].cms, informers[i].deps} {
			if inf != nil && !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				b.Fatalf("member %s did not sync", m.name)
			}
		}
	}
	started.Wait()
	stopWorkers := floorWorkers(q, informers, &done)
	defer func() {
		cancel()
		stopWorkers()
	}()
	return fleetMeasured(b, f, begin, cpu0, heap0, g0, done.Load, stopProfile)
}

// maxRSS is the process's peak resident set, in MB.
func maxRSS() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Maxrss) / 1024
}
