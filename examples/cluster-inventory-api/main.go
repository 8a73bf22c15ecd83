// Command cluster-inventory-api runs a multi-cluster controller over the
// clusters of a ClusterProfile inventory (KEP-4322) on the hub in
// $KUBECONFIG: every ready ClusterProfile becomes a cluster, reached through
// the credential plugins of an access providers file (KEP-5339).
//
//	kubectl apply -f providers/cluster-inventory-api/config/crd
//	go build -o /usr/local/bin/serviceaccount-token-plugin ./cmd/serviceaccount-token-plugin
//	go run ./examples/cluster-inventory-api -clusterprofile-provider-file access-providers.yaml
//
// (-clusterprofile-provider-file is the flag controllers built on the
// cluster-inventory-api project's library take; -access-providers is the
// same), with access-providers.yaml naming the plugin and the operator's kubeconfig
// (contexts for the members, see cmd/serviceaccount-token-plugin):
//
//	providers:
//	- name: serviceaccount-token
//	  execConfig:
//	    apiVersion: client.authentication.k8s.io/v1
//	    command: /usr/local/bin/serviceaccount-token-plugin
//	    args: ["-kubeconfig=/etc/fleet/operator.kubeconfig", "-service-account=fleet-controller"]
//	    provideClusterInfo: true
//	  allowedServers: ["*.fleet.example.com"]   # where its tokens may go
//
// A ClusterProfile whose status has the ControlPlaneHealthy condition True
// and lists "serviceaccount-token" in status.accessProviders, with the
// member's server and CA, is engaged; the controller then logs every
// ConfigMap of the member as "cluster=<namespace>/<profile> ...". With
// -cluster-id, clusters are named after their cluster.clusterset.k8s.io
// property (KEP-2149) instead.
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
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
)

func main() {
	ctrl.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	var accessProviders string
	flag.StringVar(&accessProviders, "clusterprofile-provider-file", "", "KEP-5339 access providers file (required)")
	flag.StringVar(&accessProviders, "access-providers", "", "same as -clusterprofile-provider-file")
	namespace := flag.String("namespace", "", "read ClusterProfiles of this namespace only (default: all)")
	clusterID := flag.Bool("cluster-id", false, "name clusters after their cluster.clusterset.k8s.io property")
	flag.Parse()
	if err := run(accessProviders, *namespace, *clusterID); err != nil {
		ctrl.Log.Error(err, "Exiting")
		os.Exit(1)
	}
}

func run(accessProviders, namespace string, clusterID bool) error {
	if accessProviders == "" {
		return fmt.Errorf("-clusterprofile-provider-file is required")
	}
	aps, err := clusterinventoryapi.LoadAccessProviders(accessProviders)
	if err != nil {
		return err
	}
	opts := clusterinventoryapi.Options{AccessProviders: aps, Namespace: namespace}
	if clusterID {
		opts.ClusterName = clusterinventoryapi.ClusterID
	}
	provider, err := clusterinventoryapi.New(opts)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := mcmanager.New(cfg, provider, mcmanager.Options{})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if err := provider.SetupWithManagerContext(ctx, mgr); err != nil {
		return err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
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
			set, _ := provider.ClusterSet(req.ClusterName)
			log.Info("ConfigMap reconciled", "clusterSet", set, "keys", len(cm.Data))
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
