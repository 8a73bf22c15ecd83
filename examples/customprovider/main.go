// Command customprovider shows how to write a provider: a directory of
// "<name>.kubeconfig" files, polled, in about a hundred lines on top of
// pkg/clusters. See docs/contributing/writing-a-provider.md.
//
//	go run ./examples/customprovider -dir ~/fleet/
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

func main() {
	dir := flag.String("dir", ".", "directory of <name>.kubeconfig files")
	flag.Parse()
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), NewProvider(*dir, 10*time.Second), mcmanager.Options{})
	if err == nil {
		err = mcbuilder.ControllerManagedBy(mgr).
			// The reconciler reads nothing but the request: a metadata-only watch
			// caches each ConfigMap's metadata, not its data.
			For(&corev1.ConfigMap{}, mcbuilder.OnlyMetadata).
			Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
				fmt.Println("reconciled", req)
				return mcreconcile.Result{}, nil
			}))
	}
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "customprovider:", err)
		os.Exit(1)
	}
}
