// Command cluster-api runs a multi-cluster controller over the workload
// clusters of Cluster API: run it against the management cluster (the
// current kubeconfig context); every Cluster whose control plane is
// initialised joins the fleet, under the name "<namespace>/<name>", with the
// kubeconfig Cluster API keeps in its "<name>-kubeconfig" Secret.
//
//	go run ./examples/cluster-api -namespace capi-clusters   # from providers/cluster-api
//
// The controller logs every Node of every workload cluster. The identity it
// runs as needs the RBAC listed in the package documentation of capi.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	//lint:ignore SA1019 v1beta1 is deprecated upstream, and supported here for installations that serve nothing newer.
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	capi "github.com/mcruntime/multicluster-runtime/providers/cluster-api"
)

func main() {
	namespace := flag.String("namespace", "", "read Clusters in this namespace only (default: all namespaces)")
	v1beta1 := flag.Bool("v1beta1", false, "read v1beta1 Clusters, for Cluster API installations that do not serve v1beta2")
	flag.Parse()
	ctrl.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	opts := capi.Options{}
	if *namespace != "" {
		opts.Namespaces = []string{*namespace}
	}
	if *v1beta1 {
		opts.ObjectToWatch = &clusterv1beta1.Cluster{}
	}
	if err := run(opts); err != nil {
		ctrl.Log.Error(err, "Exiting")
		os.Exit(1)
	}
}

func run(opts capi.Options) error {
	ctx := ctrl.SetupSignalHandler()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	provider := capi.New(opts)
	mgr, err := mcmanager.New(cfg, provider, mcmanager.Options{})
	if err != nil {
		return err
	}
	if err := provider.SetupWithManager(mgr); err != nil {
		return err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("fleet-nodes").
		For(&corev1.Node{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			log := ctrl.LoggerFrom(ctx)
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return mcreconcile.Result{}, err // the cluster left the fleet: dropped, not retried
			}
			node := &corev1.Node{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, node); err != nil {
				if apierrors.IsNotFound(err) {
					return mcreconcile.Result{}, nil
				}
				return mcreconcile.Result{}, err
			}
			log.Info("Node", "kubelet", node.Status.NodeInfo.KubeletVersion)
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
