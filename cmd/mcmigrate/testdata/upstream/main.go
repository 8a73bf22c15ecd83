// Command upstream is a program written against the upstream design, in
// its shape: ClusterName's String and Empty, ForCluster(handler, name).
package main

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"

	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

func reconcile(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
	l := log.FromContext(ctx)
	if req.ClusterName.Empty() {
		l.Info("on the host", "object", req.NamespacedName.String())
		return mcreconcile.Result{}, nil
	}
	if !req.ClusterName.Empty() && req.Namespace == "" {
		l.Info("cluster-scoped", "cluster", req.ClusterName.String())
	}
	names := []string{req.ClusterName.String(), "host"}
	l.Info("reconciling", "cluster", req.ClusterName.String(), "names", names)
	return mcreconcile.Result{}, nil
}

func describe(name multicluster.ClusterName) string {
	host := name.Empty()
	return fmt.Sprintf("%s (host: %v)", name.String(), host)
}

// Left by hand: a ClusterName is no fmt.Stringer here.
var _ fmt.Stringer = multicluster.ClusterName("east")

func setup(mgr mcmanager.Manager) error {
	var h handler.EventHandler = &handler.EnqueueRequestForObject{}
	_ = mchandler.ForCluster(h, "east")
	return mcbuilder.ControllerManagedBy(mgr).
		Named("upstream").
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(reconcile))
}

func main() {
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), nil, mcmanager.Options{})
	if err == nil {
		err = setup(mgr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, describe("east"), err)
		os.Exit(1)
	}
}
