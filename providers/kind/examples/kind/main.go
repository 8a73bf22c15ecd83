// Command kind is the quickstart for users of kind: one ConfigMap controller
// over every local kind cluster whose name starts with "fleet-". It needs
// kind and a container runtime (Docker, Podman or nerdctl):
//
//	kind create cluster --name fleet-alpha
//	kind create cluster --name fleet-beta
//	go run ./examples/kind              # from providers/kind
//	kubectl --context kind-fleet-beta create configmap hello --from-literal=greeting=hi
//
// The controller logs "cluster=fleet-beta namespace=default name=hello".
// Delete a cluster (kind delete cluster --name fleet-alpha) and it leaves the
// fleet; create it again and it comes back. The manager's own cluster is the
// one of the current kubeconfig context (it may be one of the kind clusters).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/kind"
)

func main() {
	prefix := flag.String("prefix", "fleet-", "engage the kind clusters whose name starts with this prefix")
	flag.Parse()
	ctrl.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	if err := run(*prefix); err != nil {
		ctrl.Log.Error(err, "Exiting")
		os.Exit(1)
	}
}

func run(prefix string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	provider := kind.New(kind.Options{Prefix: prefix})
	mgr, err := mcmanager.New(cfg, provider, mcmanager.Options{})
	if err != nil {
		return err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("fleet-configmaps").
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			log := ctrl.LoggerFrom(ctx)
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return mcreconcile.Result{}, err // the cluster left the fleet: dropped, not retried
			}
			cm := &corev1.ConfigMap{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				if apierrors.IsNotFound(err) {
					log.Info("ConfigMap deleted")
					return mcreconcile.Result{}, nil
				}
				return mcreconcile.Result{}, err
			}
			log.Info("ConfigMap reconciled", "keys", len(cm.Data))
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
