package source_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// Kind is a SyncingSource: SyncingForCluster returns the cluster's watch,
// which can be waited for, or nothing for a cluster the filter refuses.
func TestKindIsASyncingSource(t *testing.T) {
	var src mcsource.SyncingSource[client.Object] = mcsource.Kind[client.Object](&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[client.Object]()).
		WithClusterFilter(func(name multicluster.ClusterName, _ cluster.Cluster) bool { return name != "refused" })
	syncing, ok, err := src.SyncingForCluster("a", &readerCounter{})
	if err != nil || syncing == nil || !ok {
		t.Fatalf("SyncingForCluster = %v, %v, %v", syncing, ok, err)
	}
	// Not started: waiting for it fails at once, saying so.
	if err := syncing.WaitForSync(t.Context()); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("WaitForSync before Start: %v", err)
	}
	if got, ok, err := src.SyncingForCluster("refused", &readerCounter{}); got != nil || ok || err != nil {
		t.Fatalf("SyncingForCluster of a refused cluster = %v, %v, %v; want nil, false, nil", got, ok, err)
	}
	if got, ok, err := src.ForCluster("refused", &readerCounter{}); got != nil || ok || err != nil {
		t.Fatalf("ForCluster of a refused cluster = %v, %v, %v; want nil, false, nil", got, ok, err)
	}
}

// WithProjection chooses the object watched in each cluster; its error names
// the cluster.
func TestWithProjection(t *testing.T) {
	src := mcsource.Kind[client.Object](&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[client.Object]()).
		WithProjection(func(_ cluster.Cluster, obj client.Object) (client.Object, error) {
			return &corev1.Secret{}, nil
		})
	got, ok, err := src.ForCluster("a", &readerCounter{})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if s := got.(interface{ String() string }).String(); !strings.Contains(s, "*v1.Secret") {
		t.Fatalf("the projected watch is %s, want one of Secrets", s)
	}
	src.WithProjection(func(cluster.Cluster, client.Object) (client.Object, error) { return nil, errors.New("no such version") })
	if _, _, err := src.SyncingForCluster("b", &readerCounter{}); err == nil || !strings.Contains(err.Error(), `cluster "b"`) || !strings.Contains(err.Error(), "no such version") {
		t.Fatalf("a failed projection: %v, want an error naming the cluster", err)
	}
}
