package fleetreader_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// seed creates namespace ns in members 1 and 2 and the ConfigMaps named in
// objs ("1/a" is a in member 1), each with data owner=<value> when given as
// "1/a=alice".
func seed(t *testing.T, prefix string, objs ...string) string {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, nsCounter.Add(1)) // -count=N reuses the control planes
	clients := map[string]client.Client{"1": testbed.NewClient(t, members.Config(1)), "2": testbed.NewClient(t, members.Config(2))}
	for _, c := range clients {
		testbed.CreateNamespace(t, c, ns)
	}
	for _, o := range objs {
		member, rest, _ := strings.Cut(o, "/")
		name, owner, _ := strings.Cut(rest, "=")
		var data map[string]string
		if owner != "" {
			data = map[string]string{"owner": owner}
		}
		cm := testbed.CreateConfigMap(t, clients[member], ns, name, data)
		if name == "a" || name == "c" {
			cm.Labels = map[string]string{"tier": "web"}
			if err := clients[member].Update(context.Background(), cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ns
}

var nsCounter atomic.Int32

// names renders entries as cluster/name, checking that clusters come in
// order; within a cluster, the cache's order, sorted here.
func names(entries []fleetreader.Entry[*corev1.ConfigMap]) string {
	out := make([]string, len(entries))
	for i, e := range entries {
		if i > 0 && e.Cluster < entries[i-1].Cluster {
			return fmt.Sprintf("clusters out of order: %s after %s", e.Cluster, entries[i-1].Cluster)
		}
		out[i] = e.Cluster + "/" + e.Object.Name
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// expectList polls the generic List until it returns want.
func expectList(t *testing.T, r *fleetreader.Reader, want string, opts ...client.ListOption) {
	t.Helper()
	fleettest.Eventually(t, 30*time.Second, func() error {
		got, err := fleetreader.List[*corev1.ConfigMap](context.Background(), r, opts...)
		if err != nil {
			return err
		}
		if names(got) != want {
			return fmt.Errorf("List = %q, want %q", names(got), want)
		}
		return nil
	})
}

func newReader(t *testing.T, cfgs map[multicluster.ClusterName]*rest.Config, mcOpts ...mcmanager.Option) (*configProvider, *fleetreader.Reader) {
	t.Helper()
	p := newConfigProvider(cfgs)
	mgr := fleettest.NewManager(t, members.Config(0), p, mcOpts...)
	r, err := mgr.GetFleetReader()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := mgr.GetFleetReader(); again != r || err != nil {
		t.Fatalf("a second GetFleetReader returned %p, %v; want the first reader %p", again, err, r)
	}
	if err := r.Informer(context.Background(), &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	return p, r
}

func twoMembers() map[multicluster.ClusterName]*rest.Config {
	return map[multicluster.ClusterName]*rest.Config{"m1": members.Config(1), "m2": members.Config(2)}
}

func TestListAcrossMembers(t *testing.T) {
	ns := seed(t, "list", "1/a", "1/b", "2/c")
	_, r := newReader(t, twoMembers())
	ctx := context.Background()
	in := client.InNamespace(ns)

	expectList(t, r, "m1/a m1/b m2/c", in)
	expectList(t, r, "m1/a m2/c", in, client.MatchingLabels{"tier": "web"})
	expectList(t, r, "m2/c", in, fleetreader.InClusters("m2"))
	expectList(t, r, "m2/c", in, fleetreader.ClusterFilter(func(name multicluster.ClusterName, _ cluster.Cluster) bool { return name != "m1" }))
	expectList(t, r, "m1/a m1/b", in, client.Limit(2))
	if got := r.Clusters(); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Errorf("Clusters() = %v, want [m1 m2]", got)
	}

	// The client.Reader-shaped List annotates the copies it returns, never
	// the cache's objects.
	var list corev1.ConfigMapList
	if err := r.List(ctx, &list, in); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cm := range list.Items {
		got = append(got, cm.Annotations[fleetreader.ClusterAnnotation]+"/"+cm.Name)
	}
	slices.Sort(got) // within a cluster, the cache's order
	if strings.Join(got, " ") != "m1/a m1/b m2/c" {
		t.Errorf("List with annotations = %v", got)
	}
	var a corev1.ConfigMap
	if err := r.Get(ctx, "m1", client.ObjectKey{Namespace: ns, Name: "a"}, &a); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Annotations[fleetreader.ClusterAnnotation]; ok {
		t.Errorf("the cache's object of m1/a was annotated: %v", a.Annotations)
	}

	// Metadata-only reads, declared while the fleet runs: one more informer
	// per cluster, read through the client.Reader-shaped List.
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := r.Informer(ctx, meta); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		metaList := &metav1.PartialObjectMetadataList{}
		metaList.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := r.List(ctx, metaList, in, client.MatchingLabels{"tier": "web"}); err != nil {
			return err
		}
		var got []string
		for _, m := range metaList.Items {
			got = append(got, m.Annotations[fleetreader.ClusterAnnotation]+"/"+m.Name+"/"+m.Kind)
		}
		if strings.Join(got, " ") != "m1/a/ConfigMap m2/c/ConfigMap" {
			return fmt.Errorf("metadata List = %v", got)
		}
		return nil
	})

	// Get by cluster and key; a cluster that is not engaged.
	var c corev1.ConfigMap
	if err := r.Get(ctx, "m2", client.ObjectKey{Namespace: ns, Name: "c"}, &c); err != nil || c.Name != "c" {
		t.Errorf("Get m2/c: %v, %q", err, c.Name)
	}
	if err := r.Get(ctx, "m3", client.ObjectKey{Namespace: ns, Name: "c"}, &c); !errors.Is(err, multicluster.ErrClusterNotFound) || !strings.Contains(err.Error(), `"m3"`) {
		t.Errorf("Get of a cluster that is not engaged: %v, want ErrClusterNotFound naming m3", err)
	}

	// A type that is not cached is an error naming it, not a live list.
	if _, err := fleetreader.List[*corev1.Secret](ctx, r); err == nil || !strings.Contains(err.Error(), "Secret") {
		t.Errorf("List of an uncached type: %v, want an error naming Secret", err)
	}
	if err := r.Get(ctx, "m1", client.ObjectKey{Namespace: ns, Name: "s"}, &corev1.Secret{}); err == nil || !strings.Contains(err.Error(), "Secret") {
		t.Errorf("Get of an uncached type: %v, want an error naming Secret", err)
	}
	if err := r.List(ctx, &list, client.Continue("x")); err == nil {
		t.Error("List with a continue token: no error")
	}
}

func owner(obj client.Object) []string {
	if o := obj.(*corev1.ConfigMap).Data["owner"]; o != "" {
		return []string{o}
	}
	return nil
}

func TestIndexLookups(t *testing.T) {
	ns := seed(t, "index", "1/x=alice", "1/y=bob", "2/z=alice", "2/a=carol")
	p := newConfigProvider(twoMembers())
	mgr := fleettest.NewManager(t, members.Config(0), p)
	r, err := fleetreader.New(mgr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.IndexField(ctx, &corev1.ConfigMap{}, "owner", owner); err != nil {
		t.Fatal(err)
	}
	if err := r.IndexField(ctx, &corev1.ConfigMap{}, "owner", owner); err == nil {
		t.Error("indexing the same field twice: no error")
	}
	// A field indexed per cluster only (the manager's field indexer) is
	// answered by each cluster's own index.
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "perCluster", owner); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	expectList(t, r, "m1/x m2/z", client.MatchingFields{"perCluster": "alice"}, client.InNamespace(ns))
	if _, err := fleetreader.List[*corev1.ConfigMap](ctx, r, client.MatchingFields{"unindexed": "alice"}); err == nil || !strings.Contains(err.Error(), `cluster "m1"`) {
		t.Errorf("List by a field indexed nowhere: %v, want an error naming the cluster", err)
	}

	byOwner := func(o string) client.MatchingFields { return client.MatchingFields{"owner": o} }
	expectList(t, r, "m1/x m2/z", byOwner("alice"), client.InNamespace(ns))
	expectList(t, r, "m2/a", byOwner("carol"), client.MatchingLabels{"tier": "web"}, client.InNamespace(ns))
	expectList(t, r, "", byOwner("alice"), client.MatchingLabels{"tier": "web"}, client.InNamespace(ns))
	expectList(t, r, "m2/z", byOwner("alice"), fleetreader.InClusters("m2"), client.InNamespace(ns))
	expectList(t, r, "m1/x", byOwner("alice"), client.Limit(1), client.InNamespace(ns))
	expectList(t, r, "", byOwner("alice"), client.InNamespace("elsewhere"))

	// Updates move an object between values; deletes remove it.
	c1 := testbed.NewClient(t, members.Config(1))
	var y corev1.ConfigMap
	if err := c1.Get(ctx, client.ObjectKey{Namespace: ns, Name: "y"}, &y); err != nil {
		t.Fatal(err)
	}
	y.Data["owner"] = "alice"
	if err := c1.Update(ctx, &y); err != nil {
		t.Fatal(err)
	}
	expectList(t, r, "m1/x m1/y m2/z", byOwner("alice"), client.InNamespace(ns))
	expectList(t, r, "", byOwner("bob"), client.InNamespace(ns))
	if err := c1.Delete(ctx, &corev1.ConfigMap{ObjectMeta: y.ObjectMeta}); err != nil {
		t.Fatal(err)
	}
	expectList(t, r, "m1/x m2/z", byOwner("alice"), client.InNamespace(ns))

	// An index added while the fleet runs is filled from the caches at once.
	if err := r.IndexField(ctx, &corev1.ConfigMap{}, "name", func(o client.Object) []string { return []string{o.GetName()} }); err != nil {
		t.Fatal(err)
	}
	expectList(t, r, "m1/x", client.MatchingFields{"name": "x"}, client.InNamespace(ns))
	expectList(t, r, "m2/z", client.MatchingFields{"name": "z"}, client.InNamespace(ns))
}

func TestMemberLeavingTakesItsItems(t *testing.T) {
	ns := seed(t, "leaving", "1/a=dave", "2/c=dave")
	p := newConfigProvider(twoMembers())
	mgr := fleettest.NewManager(t, members.Config(0), p)
	r, err := fleetreader.New(mgr)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.IndexField(context.Background(), &corev1.ConfigMap{}, "owner", owner); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	expectList(t, r, "m1/a m2/c", client.InNamespace(ns))
	expectList(t, r, "m1/a m2/c", client.MatchingFields{"owner": "dave"}, client.InNamespace(ns))

	p.remove("m2")
	expectList(t, r, "m1/a", client.InNamespace(ns))
	expectList(t, r, "m1/a", client.MatchingFields{"owner": "dave"}, client.InNamespace(ns))
	if got := r.Clusters(); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("Clusters() = %v after m2 left", got)
	}
	fleettest.Eventually(t, 10*time.Second, func() error {
		if n := fleetreader.IndexEntries(r, &corev1.ConfigMap{}, "owner", "m2"); n != 0 {
			return fmt.Errorf("%d index entries of m2 left", n)
		}
		return nil
	})

	// Back again: its items return.
	p.set("m2", members.Config(2))
	expectList(t, r, "m1/a m2/c", client.MatchingFields{"owner": "dave"}, client.InNamespace(ns))
}

func TestMemberDisconnectedThenBack(t *testing.T) {
	ns := seed(t, "disconnect", "1/a=erin", "2/c=erin")
	cfg2, proxy := testbed.Proxied(t, members.Config(2))
	p := newConfigProvider(map[multicluster.ClusterName]*rest.Config{"m1": members.Config(1), "m2": cfg2})
	health := mcmanager.HealthOptions{Interval: 200 * time.Millisecond, Timeout: 200 * time.Millisecond, FailureThreshold: 2}
	mgr := fleettest.NewManager(t, members.Config(0), p, mcmanager.WithHealthChecks(health))
	r, err := fleetreader.New(mgr)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.IndexField(context.Background(), &corev1.ConfigMap{}, "owner", owner); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	expectList(t, r, "m1/a m2/c", client.InNamespace(ns))

	proxy.Cut()
	expectList(t, r, "m1/a", client.InNamespace(ns))
	expectList(t, r, "m1/a", client.MatchingFields{"owner": "erin"}, client.InNamespace(ns))

	proxy.SetUp(true)
	expectList(t, r, "m1/a m2/c", client.InNamespace(ns))
	expectList(t, r, "m1/a m2/c", client.MatchingFields{"owner": "erin"}, client.InNamespace(ns))
}
