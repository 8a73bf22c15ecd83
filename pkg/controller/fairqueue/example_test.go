package fairqueue_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/controller/fairqueue"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// A busy cluster's backlog does not delay a quiet cluster: the queue takes
// the clusters with work in turn.
func Example() {
	q := fairqueue.New("", fairqueue.Options[mcreconcile.Request]{
		ClusterOf: func(r mcreconcile.Request) string { return r.ClusterName },
	})
	defer q.ShutDown()
	for _, name := range []string{"a", "b", "c"} {
		q.Add(mcreconcile.Request{ClusterName: "busy", Request: reconcile.Request{NamespacedName: nameOf(name)}})
	}
	q.Add(mcreconcile.Request{ClusterName: "quiet", Request: reconcile.Request{NamespacedName: nameOf("x")}})
	for range 3 {
		r, _ := q.Get()
		fmt.Println(r.ClusterName, r.Name)
		q.Done(r)
	}
	// Output:
	// busy a
	// quiet x
	// busy b
}

// A controller-runtime controller uses the fair queue through NewQueue; a
// cluster holds at most two of the eight workers.
func ExampleNewQueueFunc() {
	opts := controller.TypedOptions[mcreconcile.Request]{
		MaxConcurrentReconciles: 8,
		NewQueue: fairqueue.NewQueueFunc(fairqueue.Options[mcreconcile.Request]{
			ClusterOf:             func(r mcreconcile.Request) string { return r.ClusterName },
			MaxInFlightPerCluster: 2,
		}),
	}
	fmt.Println(opts.NewQueue != nil)
	// Output: true
}

func nameOf(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "default", Name: name}
}
