package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

func TestRequestString(t *testing.T) {
	for _, tc := range []struct {
		req  mcreconcile.Request
		want string
	}{
		{mcreconcile.Request{ClusterName: "east", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cm"}}}, "cluster://east/ns/cm"},
		{mcreconcile.Request{ClusterName: "east", Request: reconcile.Request{NamespacedName: types.NamespacedName{Name: "node-1"}}}, "cluster://east/node-1"},
		{mcreconcile.Request{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cm"}}}, "ns/cm"},
	} {
		if got := tc.req.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.req, got, tc.want)
		}
	}
}

func TestClusterNotFoundWrapper(t *testing.T) {
	result := reconcile.Result{RequeueAfter: 7}
	for _, tc := range []struct {
		err        error
		wantErr    bool
		wantResult reconcile.Result
	}{
		{nil, false, result},
		{fmt.Errorf("reading: %w", multicluster.ErrClusterNotFound), false, reconcile.Result{}},
		{errors.New("other"), true, result},
	} {
		inner := mcreconcile.Func(func(context.Context, mcreconcile.Request) (reconcile.Result, error) { return result, tc.err })
		got, err := mcreconcile.NewClusterNotFoundWrapper(inner).Reconcile(context.Background(), mcreconcile.Request{})
		if (err != nil) != tc.wantErr || got != tc.wantResult {
			t.Errorf("inner error %v: got %v, %v; want result %v, error %v", tc.err, got, err, tc.wantResult, tc.wantErr)
		}
	}
}

func TestRequestIsClusterAware(t *testing.T) {
	req := mcreconcile.Request{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cm"}}}
	moved := req.WithCluster("east")
	if moved.Cluster() != "east" || moved.NamespacedName != req.NamespacedName {
		t.Errorf("WithCluster(east) = %#v", moved)
	}
	if req.Cluster() != "" {
		t.Errorf("WithCluster changed the original request: %#v", req)
	}
}

func TestWithClusterTagsAnyRequest(t *testing.T) {
	req := mcreconcile.WithCluster[string]{Request: "key"}
	if got := req.String(); got != "key" {
		t.Errorf("host request String() = %q", got)
	}
	east := req.WithCluster("east")
	if east.Cluster() != "east" || east.Request != "key" {
		t.Errorf("WithCluster(east) = %#v", east)
	}
	if got := east.String(); got != "cluster://east/key" {
		t.Errorf("String() = %q", got)
	}
}

func TestClusterNotFoundWrapperIsExported(t *testing.T) {
	inner := reconcile.TypedFunc[string](func(context.Context, string) (reconcile.Result, error) {
		return reconcile.Result{}, fmt.Errorf("gone: %w", multicluster.ErrClusterNotFound)
	})
	w, ok := mcreconcile.NewClusterNotFoundWrapper[string](inner).(*mcreconcile.ClusterNotFoundWrapper[string])
	if !ok {
		t.Fatal("NewClusterNotFoundWrapper does not return a *ClusterNotFoundWrapper")
	}
	if _, err := w.Reconcile(context.Background(), "x"); err != nil {
		t.Errorf("Reconcile = %v, want nil", err)
	}
	if _, err := w.Reconciler.Reconcile(context.Background(), "x"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Errorf("wrapped Reconciler returned %v", err)
	}
}
