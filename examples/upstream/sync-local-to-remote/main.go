// Command sync-local-to-remote copies the ConfigMaps of one namespace of the
// host cluster into every cluster of the fleet, as the upstream design's
// sync-local-to-remote example does. The fleet is the kubeconfig Secrets of
// the host's namespace "default".
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	kubeconfigprovider "github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

func main() {
	var source string
	flag.StringVar(&source, "source-namespace", "sync", "namespace of the host whose ConfigMaps are copied")
	flag.Parse()
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	entryLog := ctrllog.Log.WithName("entrypoint")
	ctx := ctrl.SetupSignalHandler()

	provider := kubeconfigprovider.New(kubeconfigprovider.Options{Namespace: "default"})
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
	inSource := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == source })
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("sync-local-to-remote").
		For(&corev1.ConfigMap{},
			mcbuilder.WithEngageWithLocalCluster(true),
			mcbuilder.WithEngageWithProviderClusters(false),
			mcbuilder.WithPredicates(inSource)).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
			log := ctrllog.FromContext(ctx)
			local, err := mgr.GetCluster(ctx, req.ClusterName) // "": the host
			if err != nil {
				return ctrl.Result{}, err
			}
			cm := &corev1.ConfigMap{}
			if err := local.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			for _, name := range provider.ListClusters() {
				remote, err := provider.Get(ctx, name)
				if err != nil {
					continue // left since it was listed
				}
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cm.Namespace}}
				if err := remote.GetClient().Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
					return ctrl.Result{}, fmt.Errorf("cluster %q: %w", name, err)
				}
				copied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
				op, err := controllerutil.CreateOrUpdate(ctx, remote.GetClient(), copied, func() error {
					copied.Data = cm.Data
					return nil
				})
				if err != nil {
					return ctrl.Result{}, fmt.Errorf("cluster %q: %w", name, err)
				}
				if op != controllerutil.OperationResultNone {
					log.Info("Synced ConfigMap", "to", name, "namespace", cm.Namespace, "name", cm.Name, "operation", op)
				}
			}
			// Clusters that join later get the ConfigMap at the next round.
			return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
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
