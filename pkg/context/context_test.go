package context_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mccontext "github.com/mcruntime/multicluster-runtime/pkg/context"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

func TestClusterInContext(t *testing.T) {
	if _, ok := mccontext.ClusterFrom(context.Background()); ok {
		t.Fatal("an empty context carries a cluster")
	}
	ctx := mccontext.WithCluster(context.Background(), "")
	if name, ok := mccontext.ClusterFrom(ctx); !ok || name != "" {
		t.Fatalf("host cluster: got %q, %v", name, ok)
	}
	var seen string
	r := mccontext.ReconcilerWithClusterInContext(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		seen, _ = mccontext.ClusterFrom(ctx)
		return reconcile.Result{}, nil
	}))
	if _, err := r.Reconcile(context.Background(), mcreconcile.Request{ClusterName: "west"}); err != nil {
		t.Fatal(err)
	}
	if seen != "west" {
		t.Fatalf("reconciler saw cluster %q, want west", seen)
	}
}
