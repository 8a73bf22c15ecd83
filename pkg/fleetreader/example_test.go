package fleetreader_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// exampleFleet creates namespace ns with the given ConfigMaps (name=owner)
// in members 1 and 2 of the test fleet, and returns a manager for them
// (clusters member-1 and member-2) with a Reader, and a function that starts
// the manager and returns its stop function.
func exampleFleet(prefix string, perMember ...map[string]string) (string, mcmanager.Manager, *fleetreader.Reader, func() func(), error) {
	ns := fmt.Sprintf("%s-%d", prefix, nsCounter.Add(1))
	for i, objs := range perMember {
		c, err := client.New(members.Config(i+1), client.Options{})
		if err != nil {
			return "", nil, nil, nil, err
		}
		if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return "", nil, nil, nil, err
		}
		for name, owner := range objs {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"owner": owner}}
			if err := c.Create(context.Background(), cm); err != nil {
				return "", nil, nil, nil, err
			}
		}
	}
	provider := fleettest.NewProvider(members, fleettest.ProviderOptions{Members: []int{1, 2}})
	mgr, err := mcmanager.New(members.Config(0), provider, mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return "", nil, nil, nil, err
	}
	r, err := fleetreader.New(mgr)
	if err != nil {
		return "", nil, nil, nil, err
	}
	start := func() func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()
		return func() { cancel(); <-done }
	}
	return ns, mgr, r, start, nil
}

// poll calls f every 50ms until it returns true or 30s pass.
func poll(f func() bool) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if f() {
			return true
		}
	}
	return false
}

// List every ConfigMap of a namespace across the fleet, each with the
// cluster it came from.
func Example() {
	ns, _, r, start, err := exampleFleet("example-list", map[string]string{"greeting": "ann"}, map[string]string{"greeting": "ben", "farewell": "ben"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	// Declare the type; a controller watching it would share the informer.
	if err := r.Informer(ctx, &corev1.ConfigMap{}); err != nil {
		fmt.Println(err)
		return
	}
	defer start()()

	var entries []fleetreader.Entry[*corev1.ConfigMap]
	poll(func() bool {
		entries, err = fleetreader.List[*corev1.ConfigMap](ctx, r, client.InNamespace(ns))
		return err == nil && len(entries) == 3
	})
	for _, e := range entries {
		fmt.Println(e.Cluster, e.Object.Name, e.Object.Data["owner"])
	}
	// Unordered output:
	// member-1 greeting ann
	// member-2 farewell ben
	// member-2 greeting ben
}

// Look objects up by an indexed field across the fleet: the lookup costs
// O(matches), whatever the number of clusters.
func ExampleReader_IndexField() {
	ns, _, r, start, err := exampleFleet("example-index", map[string]string{"a": "cat", "b": "dog"}, map[string]string{"c": "cat"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	err = r.IndexField(ctx, &corev1.ConfigMap{}, "data.owner", func(obj client.Object) []string {
		return []string{obj.(*corev1.ConfigMap).Data["owner"]}
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer start()()

	var entries []fleetreader.Entry[*corev1.ConfigMap]
	poll(func() bool {
		entries, err = fleetreader.List[*corev1.ConfigMap](ctx, r, client.MatchingFields{"data.owner": "cat"}, client.InNamespace(ns))
		return err == nil && len(entries) == 2
	})
	for _, e := range entries {
		fmt.Println(e.Cluster, e.Object.Name)
	}
	// Output:
	// member-1 a
	// member-2 c
}

// An aggregating controller: any change of a ConfigMap anywhere in the
// fleet, and any cluster joining or leaving, runs one reconcile of the hub
// request, which reads the fleet and summarises it.
func ExampleReader_aggregation() {
	ns, mgr, r, start, err := exampleFleet("example-agg", map[string]string{"a": "x"}, map[string]string{"b": "x", "c": "x"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := r.Informer(context.Background(), &corev1.ConfigMap{}); err != nil {
		fmt.Println(err)
		return
	}
	summaries := make(chan string, 100)
	summary := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "summary"}}
	err = mcbuilder.ControllerManagedBy(mgr).Named("example-aggregation").
		WatchesRawSource(mcsource.FanIn(&corev1.ConfigMap{}, summary)).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			entries, err := fleetreader.List[*corev1.ConfigMap](ctx, r, client.InNamespace(req.Namespace))
			if err != nil {
				return reconcile.Result{}, err
			}
			perCluster := map[string]int{}
			for _, e := range entries {
				perCluster[e.Cluster]++
			}
			summaries <- fmt.Sprint(perCluster)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer start()()

	last := ""
	poll(func() bool {
		for {
			select {
			case last = <-summaries:
			default:
				return last == "map[member-1:1 member-2:2]"
			}
		}
	})
	fmt.Println(last)
	// Output:
	// map[member-1:1 member-2:2]
}
