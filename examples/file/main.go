// Command file runs a ConfigMap controller over the clusters of kubeconfig
// files (file provider): every context of every file is a cluster, and the
// fleet follows the files as they are added, changed and removed.
//
//	go run ./examples/file -dir ~/fleet/
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

func main() {
	dir := flag.String("dir", "", "directory of kubeconfig files")
	flag.Parse()
	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), *dir, mcmanager.Options{}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "file:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *rest.Config, dir string, opts mcmanager.Options, out io.Writer) error {
	// snippet:file-provider
	provider, err := file.New(file.Options{
		KubeconfigDirs:  []string{dir},
		KubeconfigGlobs: []string{"*.kubeconfig", "*.yaml"},
		// Name clusters by context only (the default is "<path>+<context>").
		// The names must stay distinct across files.
		ClusterName: func(path, context string) multicluster.ClusterName { return context },
	})
	// end-snippet
	if err != nil {
		return err
	}
	mgr, err := mcmanager.New(cfg, provider, opts)
	if err != nil {
		return err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return mcreconcile.Result{}, err
			}
			cm := &corev1.ConfigMap{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				return mcreconcile.Result{}, client.IgnoreNotFound(err)
			}
			fmt.Fprintf(out, "reconciled %s: %d keys\n", req, len(cm.Data))
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
