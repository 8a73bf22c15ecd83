package clusters_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// A cluster that Add hands to a manager, whose controller's watch of it keeps
// failing, is refused with an error naming the cluster once: the controller,
// the engine and Clusters would each name it, and Clusters must not decide by
// reading the message.
func TestAddRefusedNamesClusterOnce(t *testing.T) {
	ns := testbed.Name("add-named-once") // -count=N reruns in the same process and fleet
	testbed.CreateNamespace(t, testbed.NewClient(t, fleet.Config(0)), ns)
	testbed.CreateConfigMap(t, testbed.NewClient(t, fleet.Config(0)), ns, "running", nil)
	proxy := testbed.NewAPIProxy(t, fleet.Config(1))
	proxy.FailLists("configmaps")

	mgr := fleettest.NewManager(t, fleet.Config(0), nil)
	rec := &fleettest.Recorder{Namespace: ns}
	c, err := mccontroller.New(ns, mgr, mccontroller.Options{Reconciler: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MultiClusterWatch(mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]())); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	cs := clusters.New[cluster.Cluster]()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Once the controller runs (before, a cluster is only remembered).
	if err := cs.Add(ctx, "healthy", testbed.NewCluster(t, fleet.Config(0)), mgr); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, 1, "healthy", ns, "running")

	err = cs.Add(ctx, "refused", testbed.NewCluster(t, proxy.Config()), mgr)
	t.Logf("Add: %v", err)
	if err == nil {
		t.Fatal("Add succeeded although every list of the cluster's ConfigMaps fails")
	}
	if n := strings.Count(err.Error(), strconv.Quote("refused")); n != 1 {
		t.Errorf("the error names the cluster %d times, want once: %v", n, err)
	}
	if !strings.HasPrefix(err.Error(), `cluster "refused": `) {
		t.Errorf("the error does not start with the cluster: %v", err)
	}
	var se *mcsource.SyncError
	if !errors.As(err, &se) || se.Type != "*v1.ConfigMap" {
		t.Errorf("the watch's *SyncError is lost: %v", err)
	}
	if _, err := cs.Get(ctx, "refused"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Errorf("Get of the refused cluster: %v, want ErrClusterNotFound", err)
	}
}
