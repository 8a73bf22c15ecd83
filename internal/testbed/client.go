package testbed

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// NewCluster returns a cluster for cfg.
func NewCluster(t testing.TB, cfg *rest.Config, opts ...cluster.Option) cluster.Cluster {
	t.Helper()
	cl, err := cluster.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// NewClient returns a direct (uncached) client for cfg.
func NewClient(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CreateNamespace creates a namespace through c, failing the test on error.
func CreateNamespace(t testing.TB, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("creating namespace %q: %v", name, err)
	}
}

// CreateConfigMap creates a ConfigMap through c, failing the test on error.
func CreateConfigMap(t testing.TB, c client.Client, namespace, name string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatalf("creating configmap %s/%s: %v", namespace, name, err)
	}
	return cm
}

var names atomic.Int64

// Name returns prefix with a suffix no other call in this process returns:
// a namespace or controller name of its own for each run of a test, so that
// tests sharing a fleet, and runs under -count, do not collide.
func Name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, names.Add(1)) }
