package source_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// A source not made by Kind fails with an error, never a panic.
func TestKindSourceWithoutHandlerFails(t *testing.T) {
	var nilSource *mcsource.KindSource[*corev1.ConfigMap]
	for name, src := range map[string]*mcsource.KindSource[*corev1.ConfigMap]{
		"nil":                    nilSource,
		"nil, filtered":          nilSource.WithClusterFilter(nil),
		"zero value":             {},
		"Kind without a handler": mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEventHandlerFunc[*corev1.ConfigMap, mcreconcile.Request](nil)),
	} {
		if got, err := src.ForCluster("a", nil); err == nil || got != nil {
			t.Errorf("%s: ForCluster = %v, %v; want an error", name, got, err)
		}
	}
}
