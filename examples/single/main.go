// Command single runs multi-cluster controller code against one cluster
// (single provider), and the same code against the host cluster alone (no
// provider at all): the way to adopt the library before there is a fleet.
//
//	go run ./examples/single              # one member named "only", from $KUBECONFIG
//	go run ./examples/single -no-provider # the host cluster, request cluster ""
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/single"
)

func main() {
	noProvider := flag.Bool("no-provider", false, "run against the host cluster only")
	flag.Parse()
	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), *noProvider, mcmanager.Options{}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "single:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *rest.Config, noProvider bool, opts mcmanager.Options, out io.Writer) error {
	// snippet:single-provider
	var provider multicluster.Provider // nil: a single-cluster manager
	if !noProvider {
		cl, err := cluster.New(cfg)
		if err != nil {
			return err
		}
		provider = single.New("only", cl)
	}
	mgr, err := mcmanager.New(cfg, provider, opts)
	// end-snippet
	if err != nil {
		return err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		// The reconciler reads nothing but the request: a metadata-only watch
		// caches each ConfigMap's metadata, not its data.
		For(&corev1.ConfigMap{}, mcbuilder.OnlyMetadata).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			fmt.Fprintln(out, "reconciled", req) // cluster://only/ns/name, or ns/name on the host
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
