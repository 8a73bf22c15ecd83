package fleettest_test

import (
	"context"
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// A Recorder counts the requests of its namespace, succeeds on the others
// without counting them, and returns what Result decides.
func TestRecorderCountsItsNamespaceAndReturnsResult(t *testing.T) {
	failure := errors.New("failed on purpose")
	rec := &fleettest.Recorder{Namespace: "mine", Result: func(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		if req.Name == "bad" {
			return reconcile.Result{}, failure
		}
		return reconcile.Result{}, nil
	}}
	ctx := context.Background()
	for _, req := range []mcreconcile.Request{
		fleettest.Request("a", "mine", "obj"),
		fleettest.Request("a", "mine", "obj"),
		fleettest.Request("b", "mine", "obj"),
		fleettest.Request("a", "theirs", "bad"),
	} {
		if _, err := rec.Reconcile(ctx, req); err != nil {
			t.Fatalf("%v: %v", req, err)
		}
	}
	if _, err := rec.Reconcile(ctx, fleettest.Request("a", "mine", "bad")); !errors.Is(err, failure) {
		t.Fatalf("want Result's error for a/mine/bad, got %v", err)
	}
	if got := rec.Count("a", "mine", "obj"); got != 2 {
		t.Errorf("a/mine/obj counted %d times, want 2", got)
	}
	if got := rec.Count("a", "theirs", "bad"); got != 0 {
		t.Errorf("a request of another namespace was counted %d times", got)
	}
	if got := len(rec.Counts()); got != 3 {
		t.Errorf("%d requests counted, want 3: %v", got, rec.Counts())
	}
	rec.WaitFor(t, 1, "b", "mine", "obj")
}
