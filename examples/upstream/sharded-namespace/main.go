// Command sharded-namespace treats every namespace of one API server as a
// cluster and shares them between replicas of itself, as the upstream
// design's sharded-namespace example does: start several with distinct
// -replica names, and each namespace is reconciled by one of them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/coordinator/sharded"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
)

func main() {
	var replica, leaseNamespace string
	flag.StringVar(&replica, "replica", os.Getenv("POD_NAME"), "this replica's name, for the logs")
	flag.StringVar(&leaseNamespace, "lease-namespace", "default", "namespace of the sharding Leases")
	flag.Parse()
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	entryLog := ctrllog.Log.WithName("entrypoint").WithValues("replica", replica)
	ctx := ctrl.SetupSignalHandler()

	cfg := ctrl.GetConfigOrDie()
	kube, err := client.New(cfg, client.Options{})
	if err != nil {
		entryLog.Error(err, "unable to create client")
		os.Exit(1)
	}
	cl, err := cluster.New(cfg)
	if err != nil {
		entryLog.Error(err, "unable to create cluster")
		os.Exit(1)
	}
	coordinator := sharded.New(kube, ctrllog.Log.WithName("sharding"),
		sharded.WithShardLease(leaseNamespace, "sharded-namespace"),
		sharded.WithPerClusterLease(true),
		sharded.WithPeerWeight(1),
		sharded.WithLeaseTimings(6*time.Second, 4*time.Second, time.Second),
	)
	mgr, err := mcmanager.New(cfg, namespace.New(cl), manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}, mcmanager.WithCoordinator(coordinator))
	if err != nil {
		entryLog.Error(err, "unable to create manager")
		os.Exit(1)
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("sharded-configmaps").
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
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
			entryLog.Info("ConfigMap found", "cluster", req.ClusterName, "name", cm.Name, "round", cm.Data["round"])
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
