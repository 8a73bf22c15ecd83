package builder

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// captured returns a logger that keeps every line it writes, with its
// key/values, in lines.
func captured(lines *[]string) logr.Logger {
	return funcr.New(func(prefix, args string) { *lines = append(*lines, args) }, funcr.Options{})
}

func TestReconcileLoggerNamesClusterAndObject(t *testing.T) {
	var lines []string
	req := mcreconcile.Request{ClusterName: "member-1", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cm"}}}

	requestLogger[mcreconcile.Request](captured(&lines), "ctrl", configMapGVK)(&req).Info("reconciled")
	requestLogger[mcreconcile.Request](captured(&lines), "ctrl", schema.GroupVersionKind{})(&req).Info("reconciled")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %d: %q", len(lines), lines)
	}
	for i, want := range [][]string{
		{`"controller"="ctrl"`, `"controllerKind"="ConfigMap"`, `"cluster"="member-1"`, `"ConfigMap"={"name"="cm" "namespace"="ns"}`, `"namespace"="ns"`, `"name"="cm"`},
		{`"controller"="ctrl"`, `"cluster"="member-1"`, `"namespace"="ns"`, `"name"="cm"`},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %s", i, lines[i], w)
			}
		}
	}
}

func TestReconcileLoggerNamesClusterOfOtherRequestTypes(t *testing.T) {
	var lines []string
	req := mcreconcile.WithCluster[string]{ClusterName: "member-2", Request: "key"}
	requestLogger[mcreconcile.WithCluster[string]](captured(&lines), "ctrl", schema.GroupVersionKind{})(&req).Info("reconciled")
	if len(lines) != 1 || !strings.Contains(lines[0], `"cluster"="member-2"`) || !strings.Contains(lines[0], `"request"=`) {
		t.Fatalf("want one line naming the cluster and the request, got %q", lines)
	}
}

// The constructor runs for every reconcile: with logs discarded it must not
// allocate (the request used to be copied into an interface, and the
// key/values boxed, for a logger that drops them).
func TestReconcileLoggerAllocatesNothingWhenDiscarded(t *testing.T) {
	log := requestLogger[mcreconcile.Request](logr.Discard(), "ctrl", configMapGVK)
	req := mcreconcile.Request{ClusterName: "member-1", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cm"}}}
	if n := testing.AllocsPerRun(100, func() { _ = log(&req) }); n != 0 {
		t.Errorf("%v allocations per reconcile with logs discarded, want 0", n)
	}
}
