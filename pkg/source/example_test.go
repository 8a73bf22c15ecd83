package source_test

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// A source that watches only some clusters.
func ExampleTypedKindSource_WithClusterFilter() {
	var mgr mcmanager.Manager
	var r mcreconcile.Reconciler
	production := func(name multicluster.ClusterName, _ cluster.Cluster) bool { return name != "" && name != "staging" }
	src := mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]()).
		WithClusterFilter(production)
	_ = mcbuilder.ControllerManagedBy(mgr).Named("production-configmaps").WatchesRawSource(src).Complete(r)
}
