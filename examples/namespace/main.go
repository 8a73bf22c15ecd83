// Command namespace runs a multi-cluster controller over the namespace
// provider: every Namespace of the API server in $KUBECONFIG is a virtual
// cluster, and one ConfigMap controller serves them all through a single
// shared cache.
//
//	go run ./examples/namespace
//	kubectl create namespace team-a
//	kubectl -n team-a create configmap hello --from-literal=greeting=hi
//
// The controller prints "reconciled cluster://team-a/default/hello: 1 keys":
// inside the virtual cluster, the ConfigMap lives in namespace "default".
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
)

func main() {
	ctrl.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), mcmanager.Options{}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "namespace:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *rest.Config, opts mcmanager.Options, out io.Writer) error {
	// snippet:namespace-provider
	// The provider's cluster holds the cache that all virtual clusters share.
	shared, err := cluster.New(cfg)
	if err != nil {
		return err
	}
	mgr, err := mcmanager.New(cfg, namespace.New(shared), opts)
	// end-snippet
	if err != nil {
		return err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return mcreconcile.Result{}, err // the namespace is gone: dropped, not retried
			}
			cm := &corev1.ConfigMap{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				if apierrors.IsNotFound(err) {
					fmt.Fprintln(out, "deleted", req)
					return mcreconcile.Result{}, nil
				}
				return mcreconcile.Result{}, err
			}
			fmt.Fprintf(out, "reconciled %s: %d keys\n", req, len(cm.Data))
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
