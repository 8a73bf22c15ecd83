// Command kubeconfig runs a ConfigMap controller over the clusters whose
// kubeconfigs are stored in labelled Secrets on the host cluster (kubeconfig
// provider). Register a member with:
//
//	go run ./cmd/kubeconfig-secret -h
//	go run ./examples/kubeconfig -namespace fleet-system
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
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

func main() {
	ns := flag.String("namespace", kubeconfig.DefaultNamespace, "namespace of the kubeconfig Secrets")
	flag.Parse()
	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), *ns, mcmanager.Options{}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *rest.Config, namespace string, opts mcmanager.Options, out io.Writer) error {
	// snippet:kubeconfig-provider
	provider := kubeconfig.New(kubeconfig.Options{
		Namespace:             namespace,
		KubeconfigSecretLabel: kubeconfig.DefaultKubeconfigSecretLabel, // value must be "true"
		KubeconfigSecretKey:   kubeconfig.DefaultKubeconfigSecretKey,
	})
	mgr, err := mcmanager.New(cfg, provider, opts)
	if err != nil {
		return err
	}
	// The provider is a controller on the host cluster: it watches the Secrets.
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	// end-snippet
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
