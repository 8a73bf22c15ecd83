// Command uniform is a uniform multi-cluster controller: the same logic runs
// in every cluster of the fleet, each cluster on its own. It keeps a
// "baseline" ConfigMap in every namespace of every cluster (a stand-in for the
// quotas, policies and default RBAC that platform teams standardise), and puts
// it back when someone deletes or edits it.
//
//	go run ./examples/uniform -kubeconfig-dir ~/fleet/
//
// The fleet comes from the kubeconfig files in the directory (file provider);
// the host cluster from $KUBECONFIG or ~/.kube/config.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// BaselineName is the ConfigMap kept in every namespace.
const BaselineName = "baseline"

// Baseline is its content.
var Baseline = map[string]string{"owner": "platform-team", "tier": "standard"}

func main() {
	dir := flag.String("kubeconfig-dir", "", "directory of kubeconfig files: the fleet")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "uniform:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	provider, err := file.New(file.Options{KubeconfigDirs: []string{dir}})
	if err != nil {
		return err
	}
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), provider, mcmanager.Options{})
	if err != nil {
		return err
	}
	if err := Setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// snippet:uniform-setup
// Setup registers the baseline controller. It reconciles Namespaces and owns
// the baseline ConfigMaps: deleting or editing one brings its namespace back
// into the queue, in the same cluster.
func Setup(mgr mcmanager.Manager) error {
	return mcbuilder.ControllerManagedBy(mgr).
		Named("baseline").
		For(&corev1.Namespace{}).
		Owns(&corev1.ConfigMap{}).
		Complete(&BaselineReconciler{Manager: mgr})
}

// end-snippet

// BaselineReconciler keeps the baseline ConfigMap of one namespace of one cluster.
type BaselineReconciler struct {
	Manager mcmanager.Manager
}

// snippet:uniform-reconcile
func (r *BaselineReconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
	// The only multi-cluster line: pick the cluster the request came from.
	cl, err := r.Manager.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return mcreconcile.Result{}, err // the cluster left the fleet: dropped, not retried
	}
	c := cl.GetClient()

	ns := &corev1.Namespace{}
	if err := c.Get(ctx, req.NamespacedName, ns); err != nil {
		return mcreconcile.Result{}, client.IgnoreNotFound(err)
	}
	if strings.HasPrefix(ns.Name, "kube-") || ns.DeletionTimestamp != nil {
		return mcreconcile.Result{}, nil
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: BaselineName}}
	_, err = controllerutil.CreateOrUpdate(ctx, c, cm, func() error {
		cm.Data = maps.Clone(Baseline)
		return controllerutil.SetControllerReference(ns, cm, c.Scheme())
	})
	return mcreconcile.Result{}, err // a conflict with another writer is retried with backoff
}

// end-snippet
