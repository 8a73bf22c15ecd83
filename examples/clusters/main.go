// Command clusters builds its fleet in code (clusters provider): each
// -kubeconfig flag becomes a cluster named after its position, added before
// the manager starts; programs can add and remove clusters at any time.
//
//	go run ./examples/clusters -kubeconfig a.yaml -kubeconfig b.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/clusters"
)

type paths []string

func (p *paths) String() string     { return strings.Join(*p, ",") }
func (p *paths) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	var kubeconfigs paths
	flag.Var(&kubeconfigs, "kubeconfig", "kubeconfig of a member (repeatable)")
	flag.Parse()
	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), kubeconfigs, mcmanager.Options{}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "clusters:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, host *rest.Config, kubeconfigs []string, opts mcmanager.Options, out io.Writer) error {
	// snippet:clusters-provider
	provider := clusters.New()
	for i, path := range kubeconfigs {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return fmt.Errorf("cluster %d: %w", i, err)
		}
		cl, err := cluster.New(cfg)
		if err != nil {
			return fmt.Errorf("cluster %d: %w", i, err)
		}
		// The provider starts the cluster, waits for its cache and engages it.
		if err := provider.Add(ctx, fmt.Sprintf("member-%d", i), cl); err != nil {
			return err
		}
	}
	// end-snippet
	mgr, err := mcmanager.New(host, provider, opts)
	if err != nil {
		return err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		// The reconciler reads nothing but the request: a metadata-only watch
		// caches each ConfigMap's metadata, not its data.
		For(&corev1.ConfigMap{}, mcbuilder.OnlyMetadata).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			fmt.Fprintln(out, "reconciled", req)
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
