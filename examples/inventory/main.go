// Command inventory runs the provider of the "Write a provider" page
// (docs/contributing/writing-a-provider.md): cluster entries are ConfigMaps
// labelled example.com/cluster-entry=true in a namespace of the host, with
// their credentials in a Secret beside them; the provider is about a hundred
// lines on top of the inventory kit (pkg/inventory).
//
//	go run ./examples/inventory -namespace fleet
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

func main() {
	namespace := flag.String("namespace", "default", "namespace of the host holding the cluster entries")
	flag.Parse()
	if err := run(ctrl.SetupSignalHandler(), *namespace); err != nil {
		fmt.Fprintln(os.Stderr, "inventory:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, namespace string) error {
	provider := NewProvider(namespace)
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), provider, mcmanager.Options{})
	if err != nil {
		return err
	}
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		// The reconciler reads nothing but the request: a metadata-only watch
		// caches each ConfigMap's metadata, not its data.
		For(&corev1.ConfigMap{}, mcbuilder.OnlyMetadata).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			fmt.Println("reconciled", req.ClusterName, req.NamespacedName)
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
