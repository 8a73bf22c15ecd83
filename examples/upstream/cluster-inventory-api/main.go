// Command cluster-inventory-api reconciles the ConfigMaps of every cluster a
// ClusterProfile of the host describes (KEP-4322), reached through the
// access providers of KEP-5339, as the upstream design's
// cluster-inventory-api example does.
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
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/credentials"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/kubeconfigstrategy"
)

func main() {
	var providerFile string
	flag.StringVar(&providerFile, "clusterprofile-provider-file", "", "KEP-5339 access providers file")
	flag.Parse()
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	entryLog := ctrllog.Log.WithName("entrypoint")
	ctx := ctrl.SetupSignalHandler()

	accessProviders, err := credentials.LoadAccessProviders(providerFile)
	if err != nil {
		entryLog.Error(err, "unable to load access providers")
		os.Exit(1)
	}
	provider, err := clusterinventoryapi.New(clusterinventoryapi.Options{
		KubeconfigStrategyOption: kubeconfigstrategy.Option{
			// Upstream: Provider: accessConfig, an *access.Config of
			// sigs.k8s.io/cluster-inventory-api (not a dependency here).
			AccessProvider: &kubeconfigstrategy.AccessProviderOption{
				Provider: &credentials.AccessProvidersConfig{Providers: accessProviders},
			},
		},
	})
	if err != nil {
		entryLog.Error(err, "unable to create provider")
		os.Exit(1)
	}
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
			log.Info("ConfigMap found", "namespace", cm.Namespace, "name", cm.Name)
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
