// Command upstream reconciles the ConfigMaps of every cluster a Cluster API
// Cluster of the host describes, as the upstream design's cluster-api example
// does, with its names: it would build from the upstream program with only
// the import prefix changed.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	capi "github.com/mcruntime/multicluster-runtime/providers/cluster-api"
)

func main() {
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	entryLog := ctrllog.Log.WithName("entrypoint")
	ctx := ctrl.SetupSignalHandler()

	provider := capi.New(capi.Options{})
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), provider, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		entryLog.Error(err, "unable to create manager")
		os.Exit(1)
	}
	if err := provider.SetupWithManager(mgr); err != nil {
		entryLog.Error(err, "unable to set up provider")
		os.Exit(1)
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("multicluster-configmaps").
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
			log := ctrllog.FromContext(ctx).WithValues("cluster", req.ClusterName)
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return ctrl.Result{}, err
			}
			cm := &corev1.ConfigMap{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				if apierrors.IsNotFound(err) {
					return ctrl.Result{}, nil
				}
				return ctrl.Result{}, err
			}
			log.Info("ConfigMap found", "namespace", cm.Namespace, "name", cm.Name, "clusters", len(provider.ListClusters()))
			return ctrl.Result{}, nil
		}))
	if err != nil {
		entryLog.Error(err, "unable to create controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctx); err != nil {
		entryLog.Error(err, "unable to run manager")
		os.Exit(1)
	}
}
