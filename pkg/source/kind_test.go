package source_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

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
		if got, ok, err := src.ForCluster("a", nil); err == nil || got != nil || ok {
			t.Errorf("%s: ForCluster = %v, %v, %v; want an error", name, got, ok, err)
		}
	}
}

// readerCounter is a cluster that counts the API readers asked of it.
type readerCounter struct {
	cluster.Cluster // nil: only the methods below are called
	asked           int
}

func (c *readerCounter) GetAPIReader() client.Reader { c.asked++; return nil }
func (c *readerCounter) GetCache() cache.Cache       { return nil }
func (c *readerCounter) GetScheme() *runtime.Scheme  { return scheme.Scheme }

// A cluster's watch asks for its API reader only when it lists directly
// (a watch slow to sync): pkg/clusters.NewCluster builds the reader on first
// use, 3 KB per cluster that most clusters of a fleet never need.
func TestKindSourceDoesNotAskForTheAPIReaderUpFront(t *testing.T) {
	src := mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]())
	cl := &readerCounter{}
	if _, _, err := src.ForCluster("a", cl); err != nil {
		t.Fatal(err)
	}
	if cl.asked != 0 {
		t.Fatalf("ForCluster asked for the API reader %d times, want 0", cl.asked)
	}
}
