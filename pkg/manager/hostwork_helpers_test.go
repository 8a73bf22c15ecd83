package manager_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crbuilder "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Kinds of work recorded by a workLog.
const (
	hostOnly = "host-only" // a multi-cluster controller WithHostReconcilesOnHostOwner
	plain    = "plain"     // a controller-runtime controller on GetLocalManager()
	fanOut   = "fan-out"   // hub to fleet: a host watch that writes into members
	member   = "member"    // a controller of the members' own objects
	job      = "job"       // a runnable that needs leader election, added to the manager
)

// work is one reconcile: which replica ran which kind of work for which
// cluster ("" for the host), what it saw, and when.
type work struct {
	replica, kind, cluster, v string
	start, end                time.Time
}

// write is one change of a member's copy by the fan-out.
type write struct{ replica, cluster, v string }

type workLog struct {
	mu     sync.Mutex
	works  []work
	writes []write
}

func (l *workLog) add(w work) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.works = append(l.works, w)
}

// seen returns the replicas that did kind for cluster seeing v.
func (l *workLog) seen(kind, cluster, v string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, w := range l.works {
		if w.kind == kind && w.cluster == cluster && w.v == v {
			out[w.replica]++
		}
	}
	return out
}

// firstAfter returns the first work of kind for cluster that started after t.
func (l *workLog) firstAfter(kind, cluster string, t time.Time) (work, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.works {
		if w.kind == kind && w.cluster == cluster && w.start.After(t) {
			return w, true
		}
	}
	return work{}, false
}

// writesOf counts the fan-out's writes of v into each member, by replica.
func (l *workLog) writesOf(v string) map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for _, w := range l.writes {
		if w.v == v {
			out[w.cluster] = append(out[w.cluster], w.replica)
		}
	}
	return out
}

// overlaps returns pairs of works on one target (the host's work taken
// together, or one member) done by two replicas at once.
func (l *workLog) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	byTarget := map[string][]work{}
	for _, w := range l.works {
		target := w.cluster
		if target == "" {
			target = "<host>"
		}
		byTarget[target] = append(byTarget[target], w)
	}
	var out []string
	for target, ws := range byTarget {
		sort.Slice(ws, func(i, j int) bool { return ws[i].start.Before(ws[j].start) })
		for i := range ws {
			for j := i + 1; j < len(ws) && ws[j].start.Before(ws[i].end); j++ {
				if ws[i].replica != ws[j].replica {
					out = append(out, fmt.Sprintf("%s: %s %s [%s, %s] and %s %s [%s, %s]", target,
						ws[i].replica, ws[i].kind, ws[i].start.Format(time.StampMicro), ws[i].end.Format(time.StampMicro),
						ws[j].replica, ws[j].kind, ws[j].start.Format(time.StampMicro), ws[j].end.Format(time.StampMicro)))
				}
			}
		}
	}
	return out
}

func (l *workLog) count() (works, writes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.works), len(l.writes)
}

// hostWorkBed is a sharded group of replicas over the host (fleet member 0)
// and named members on members 1 and 2, each running the four kinds of work
// on namespace ns: the host objects "rollup" (host-only and plain
// controllers) and "source" (fan-out to "copy-<member>" in each member), and
// the members' own ConfigMaps "cm" (member controller).
type hostWorkBed struct {
	t       *testing.T
	ns      string
	group   string
	names   map[multicluster.ClusterName]int
	log     *workLog
	lease   time.Duration
	busy    bool // work requeues itself, so that a hand-off with an overlap would show
	plain   bool // run the plain controller-runtime controller (it starts once per process)
	gen     int
	started map[string]hostWorkReplica
	clients []client.Client // of fleet members 0 (the host), 1 and 2
}

type hostWorkReplica struct {
	mgr  mcmanager.Manager
	stop func()
	host *testbed.Proxy
}

func newHostWorkBed(t *testing.T, prefix string, members int) *hostWorkBed {
	b := &hostWorkBed{
		t: t, ns: testbed.Name(prefix), group: testbed.Name(prefix), log: &workLog{},
		names: map[multicluster.ClusterName]int{}, lease: 3 * time.Second, started: map[string]hostWorkReplica{},
	}
	for i := range 3 {
		c := testbed.NewClient(t, fleet.Config(i))
		b.clients = append(b.clients, c)
		testbed.CreateNamespace(t, c, b.ns)
		if i > 0 {
			testbed.CreateConfigMap(t, c, b.ns, "cm", nil)
		}
	}
	host := testbed.NewClient(t, fleet.Config(0))
	testbed.CreateConfigMap(t, host, b.ns, "rollup", map[string]string{"v": "0"})
	testbed.CreateConfigMap(t, host, b.ns, "source", map[string]string{"v": "0"})
	for j := range members {
		b.names[fmt.Sprintf("%s-m%d", prefix, j)] = 1 + j%2
	}
	return b
}

// set writes v into the host object name.
func (b *hostWorkBed) set(name, v string) {
	b.t.Helper()
	c := b.clients[0]
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: b.ns, Name: name}, cm); err != nil {
		b.t.Fatal(err)
	}
	cm.Data = map[string]string{"v": v}
	if err := c.Update(context.Background(), cm); err != nil {
		b.t.Fatal(err)
	}
}

// start starts replica r: a manager with sharding and the four kinds of work.
func (b *hostWorkBed) start(r string) {
	t := b.t
	b.gen++
	hostCfg, proxy := testbed.Proxied(t, fleet.Config(0))
	mgr, err := mcmanager.New(hostCfg, fleettest.NewNamedProvider(fleet, b.names), mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}, mcmanager.WithSharding(sharding.Options{
		Namespace: "default", Name: b.group, Identity: r,
		LeaseDuration: b.lease, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
	}))
	if err != nil {
		t.Fatal(err)
	}
	inNs := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == b.ns })
	named := func(name string) predicate.Predicate {
		return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == b.ns && o.GetName() == name })
	}
	hostClient := mgr.GetLocalManager().GetAPIReader()
	readV := func(ctx context.Context, name string) string {
		cm := &corev1.ConfigMap{}
		if err := mgr.GetLocalManager().GetClient().Get(ctx, types.NamespacedName{Namespace: b.ns, Name: name}, cm); err != nil {
			return "error: " + err.Error()
		}
		return cm.Data["v"]
	}
	record := func(kind, cluster string, do func() string) {
		start := time.Now()
		v := do()
		time.Sleep(2 * time.Millisecond) // a reconcile takes time: works have length
		b.log.add(work{replica: r, kind: kind, cluster: cluster, v: v, start: start, end: time.Now()})
	}

	// Host-only: a roll-up of a hub object, written to the host alone.
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("host-only-%d", b.gen)).
		For(&corev1.ConfigMap{}, mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false),
			mcbuilder.WithPredicates(named("rollup"))).
		WithHostReconcilesOnHostOwner(true).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			record(hostOnly, req.ClusterName, func() string { return readV(ctx, req.Name) })
			return b.again(), nil
		})); err != nil {
		t.Fatal(err)
	}
	// A job: a runnable that needs leader election, working while it runs.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		for {
			record(job, "", func() string { return "" })
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(20 * time.Millisecond):
			}
		}
	})); err != nil {
		t.Fatal(err)
	}
	// Plain: a controller-runtime controller built on the host manager.
	if b.plain {
		if err := ctrl.NewControllerManagedBy(mgr.GetLocalManager()).Named(fmt.Sprintf("plain-%d", b.gen)).
			For(&corev1.ConfigMap{}, crbuilder.WithPredicates(named("rollup"))).
			Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				record(plain, "", func() string { return readV(ctx, req.Name) })
				return reconcile.Result{}, nil
			})); err != nil {
			t.Fatal(err)
		}
	}
	// Fan-out: the host object "source" copied into every member; every
	// replica receives the host's events and writes the members it owns.
	all := slices.Sorted(maps.Keys(b.names))
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("fan-out-%d", b.gen)).
		Watches(&corev1.ConfigMap{}, mchandler.EnqueueClusterRequestsFromMapFunc(func(_ context.Context, _ multicluster.ClusterName, _ client.Object) []mcreconcile.Request {
			out := make([]mcreconcile.Request, 0, len(all))
			for _, name := range all {
				out = append(out, mcreconcile.Request{ClusterName: name, Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.ns, Name: "copy-" + name}}})
			}
			return out
		}), mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false), mcbuilder.WithPredicates(named("source"))).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			var err error
			record(fanOut, req.ClusterName, func() string {
				var v string
				v, err = b.copyInto(ctx, mgr, hostClient, req)
				if err == nil && v != "" {
					b.log.mu.Lock()
					b.log.writes = append(b.log.writes, write{replica: r, cluster: req.ClusterName, v: v})
					b.log.mu.Unlock()
				}
				return v
			})
			return reconcile.Result{}, err
		})); err != nil {
		t.Fatal(err)
	}
	// Member work: each member's own ConfigMap, kept busy.
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("member-%d", b.gen)).
		For(&corev1.ConfigMap{}, mcbuilder.WithPredicates(inNs, named("cm"))).
		Complete(mcreconcile.Func(func(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			record(member, req.ClusterName, func() string { return "" })
			return b.again(), nil
		})); err != nil {
		t.Fatal(err)
	}
	b.started[r] = hostWorkReplica{mgr: mgr, stop: fleettest.RunManager(t, mgr), host: proxy}
}

// again keeps a busy bed's work going.
func (b *hostWorkBed) again() reconcile.Result {
	if b.busy {
		return reconcile.Result{RequeueAfter: 20 * time.Millisecond}
	}
	return reconcile.Result{}
}

// copyInto writes the host's "source" into the member's copy if it differs,
// reading both from the API servers; it returns the value written, "" if
// the copy was current.
func (b *hostWorkBed) copyInto(ctx context.Context, mgr mcmanager.Manager, host client.Reader, req mcreconcile.Request) (string, error) {
	cl, err := mgr.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return "", err
	}
	src := &corev1.ConfigMap{}
	if err := host.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: "source"}, src); err != nil {
		return "", err
	}
	v := src.Data["v"]
	cur := &corev1.ConfigMap{}
	err = cl.GetAPIReader().Get(ctx, req.NamespacedName, cur)
	switch {
	case apierrors.IsNotFound(err):
		cur = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}, Data: map[string]string{"v": v}}
		return v, cl.GetClient().Create(ctx, cur)
	case err != nil:
		return "", err
	case cur.Data["v"] == v:
		return "", nil
	}
	cur.Data = map[string]string{"v": v}
	return v, cl.GetClient().Update(ctx, cur)
}

// kill cuts replica r from the host and stops it: it releases nothing, its
// Leases expire.
func (b *hostWorkBed) kill(r string) {
	b.started[r].host.Cut()
	b.started[r].stop()
	delete(b.started, r)
}

// stop stops replica r cleanly: it hands its work over at once.
func (b *hostWorkBed) stop(r string) {
	b.started[r].stop()
	delete(b.started, r)
}

// hostOwner waits until every live replica agrees on the host's owner, one of
// them, and returns it.
func (b *hostWorkBed) hostOwner() string {
	b.t.Helper()
	var owner string
	fleettest.Eventually(b.t, time.Minute, func() error {
		owners := map[string]bool{}
		for _, rep := range b.started {
			owners[rep.mgr.(interface{ Assignment() fleetreader.Assignment }).Assignment().Owner(sharding.HostKey)] = true
		}
		if len(owners) != 1 {
			return fmt.Errorf("the replicas assign the host to %v", owners)
		}
		for o := range owners {
			owner = o
		}
		if _, ok := b.started[owner]; !ok {
			return fmt.Errorf("the host is assigned to %q, not a live replica", owner)
		}
		return nil
	})
	return owner
}

// hostWorkDone waits until the host-only and plain controllers have
// reconciled "rollup" at v, and returns the replicas that did.
func (b *hostWorkBed) hostWorkDone(v string) (hostOnlyBy, plainBy map[string]int) {
	b.t.Helper()
	fleettest.Eventually(b.t, time.Minute, func() error {
		hostOnlyBy, plainBy = b.log.seen(hostOnly, "", v), b.log.seen(plain, "", v)
		if len(hostOnlyBy) == 0 || len(plainBy) == 0 {
			return fmt.Errorf("rollup v=%s reconciled by host-only %v, plain %v", v, hostOnlyBy, plainBy)
		}
		return nil
	})
	return hostOnlyBy, plainBy
}

// copiesAt waits until every member's copy holds v.
func (b *hostWorkBed) copiesAt(v string) {
	b.t.Helper()
	fleettest.Eventually(b.t, time.Minute, func() error {
		for name, i := range b.names {
			cm := &corev1.ConfigMap{}
			if err := b.clients[i].Get(context.Background(), types.NamespacedName{Namespace: b.ns, Name: "copy-" + name}, cm); err != nil {
				return fmt.Errorf("member %s: %w", name, err)
			}
			if cm.Data["v"] != v {
				return fmt.Errorf("member %s's copy holds v=%s, want %s", name, cm.Data["v"], v)
			}
		}
		return nil
	})
}
