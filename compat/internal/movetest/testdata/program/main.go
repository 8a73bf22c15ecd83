// Command program is on this library's import path and uses a provider
// module built on upstream's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"

	"example.com/fleetprovider"
)

func main() {
	host := flag.String("host", "", "the host cluster's kubeconfig")
	members := flag.String("members", "", "name=kubeconfig,... of the provider's clusters")
	flag.Parse()
	log := zap.New()
	ctrl.SetLogger(log)
	if err := run(*host, *members); err != nil {
		fmt.Fprintln(os.Stderr, "program:", err)
		os.Exit(1)
	}
}

func run(host, members string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", host)
	if err != nil {
		return err
	}
	kubeconfigs := map[string]string{}
	for _, m := range strings.Split(members, ",") {
		name, file, _ := strings.Cut(m, "=")
		kubeconfigs[name] = file
	}
	provider := fleetprovider.New(kubeconfigs)
	mgr, err := mcmanager.New(cfg, provider, mcmanager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	if err := provider.SetupWithManager(mgr); err != nil {
		return err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("moved-configmaps").
		For(&corev1.ConfigMap{}).
		Complete(fleetprovider.Logged(mgr.GetLogger(), mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return mcreconcile.Result{}, err
			}
			cm := &corev1.ConfigMap{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				if apierrors.IsNotFound(err) {
					return mcreconcile.Result{}, nil
				}
				return mcreconcile.Result{}, err
			}
			fmt.Printf("reconciled %s %s/%s %s\n", req.ClusterName, req.Namespace, req.Name, cm.Data["value"])
			return mcreconcile.Result{}, nil
		})))
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
