// Command kubeconfig reconciles the ConfigMaps of every cluster whose
// kubeconfig a labelled Secret of the host holds, as the upstream design's
// kubeconfig example does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	kubeconfigprovider "github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

func main() {
	var namespace, label, key string
	flag.StringVar(&namespace, "namespace", "default", "namespace of the kubeconfig Secrets")
	flag.StringVar(&label, "kubeconfig-label", "sigs.k8s.io/multicluster-runtime-kubeconfig", "label key of the kubeconfig Secrets")
	flag.StringVar(&key, "kubeconfig-key", "kubeconfig", "data key of the kubeconfig in the Secrets")
	flag.Parse()
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	entryLog := ctrllog.Log.WithName("entrypoint")
	ctx := ctrl.SetupSignalHandler()

	// snippet:porting-provider
	provider := kubeconfigprovider.New(kubeconfigprovider.Options{
		Namespace:             namespace,
		KubeconfigSecretLabel: label,
		KubeconfigSecretKey:   key,
		ControllerName:        kubeconfigprovider.DefaultControllerName,
		RESTOptions: []func(*rest.Config) error{func(cfg *rest.Config) error {
			cfg.UserAgent = "upstream-kubeconfig-example"
			return nil
		}},
	})
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), provider, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		entryLog.Error(err, "unable to create manager")
		os.Exit(1)
	}
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		entryLog.Error(err, "unable to set up provider")
		os.Exit(1)
	}
	// end-snippet
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
			log.Info("ConfigMap found", "namespace", cm.Namespace, "name", cm.Name,
				"clusters", len(provider.ListClusters()), "userAgent", cl.GetConfig().UserAgent)
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
