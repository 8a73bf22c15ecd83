// Command multi combines two providers into one fleet (multi provider): the
// clusters of kubeconfig files under the prefix "files", and the namespaces of
// the host cluster as virtual clusters under the prefix "ns". Cluster names
// read "files#<name>" and "ns#<namespace>".
//
//	go run ./examples/multi -dir ~/fleet/
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
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/file"
	"github.com/mcruntime/multicluster-runtime/providers/multi"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
)

func main() {
	dir := flag.String("dir", "", "directory of kubeconfig files")
	flag.Parse()
	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), *dir, mcmanager.Options{}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "multi:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *rest.Config, dir string, opts mcmanager.Options, out io.Writer) error {
	// snippet:multi-provider
	provider := multi.New(multi.Options{Separator: "#"})

	files, err := file.New(file.Options{KubeconfigDirs: []string{dir}})
	if err != nil {
		return err
	}
	if err := provider.AddProvider("files", files); err != nil {
		return err
	}
	host, err := cluster.New(cfg)
	if err != nil {
		return err
	}
	if err := provider.AddProvider("ns", namespace.New(host)); err != nil {
		return err
	}
	// end-snippet
	mgr, err := mcmanager.New(cfg, provider, opts)
	if err != nil {
		return err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		// The reconciler reads nothing but the request: a metadata-only watch
		// caches each ConfigMap's metadata, not its data.
		For(&corev1.ConfigMap{}, mcbuilder.OnlyMetadata).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			fmt.Fprintln(out, "reconciled", req) // cluster://files#dev/default/x, cluster://ns#team-a/default/y
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
