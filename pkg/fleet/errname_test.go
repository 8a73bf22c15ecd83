package fleet_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// namesClusterOnce fails the test unless err names the cluster exactly once,
// in front, and still matches the watch's *SyncError by type.
func namesClusterOnce(t *testing.T, err error, name string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if n := strings.Count(msg, strconv.Quote(name)); n != 1 {
		t.Errorf("the error names cluster %q %d times, want once: %v", name, n, msg)
	}
	if want := "cluster " + strconv.Quote(name) + ": "; !strings.HasPrefix(msg, want) {
		t.Errorf("the error does not start with %q: %v", want, msg)
	}
	var ce *multicluster.ClusterError
	if !errors.As(err, &ce) || ce.Cluster != name {
		t.Errorf("the error is not a *multicluster.ClusterError for %q: %v", name, msg)
	}
	var se *mcsource.SyncError
	if !errors.As(err, &se) || se.Type != "*v1.ConfigMap" {
		t.Errorf("the watch's *SyncError is lost: %v", msg)
	}
}

// startedCluster starts a cluster on cfg as its provider would, until the test ends.
func startedCluster(t *testing.T, cfg *rest.Config) cluster.Cluster {
	t.Helper()
	cl := testbed.NewCluster(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = cl.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	if !cl.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return cl
}

// An engagement refused because a watch's list keeps failing names the
// cluster once, whoever engages it: mgr.Engage (the engine names it and takes
// off the controller's naming), and a user calling the controller's Engage
// directly (the controller's Engage names it).
func TestEngageErrorNamesClusterOnce(t *testing.T) {
	proxy := testbed.NewAPIProxy(t, members.Config(1))
	proxy.FailLists("configmaps")
	ns := unique("named-once") // -count=N reruns in the same process and fleet
	testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(2)), ns)
	testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(2)), ns, "running", nil)
	mgr := fleettest.NewManager(t, members.Config(0), nil)
	ctrlName := unique("named-once")
	rec := &fleettest.Recorder{Namespace: ns}
	c, err := mccontroller.New(ctrlName, mgr, mccontroller.Options{Reconciler: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MultiClusterWatch(mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]())); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	// Once the controller runs (a cluster engaged before is only remembered,
	// and its watches start in the background).
	if err := mgr.Engage(context.Background(), "healthy", startedCluster(t, members.Config(2))); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, 1, "healthy", ns, "running")
	cl := startedCluster(t, proxy.Config())

	t.Run("mgr.Engage", func(t *testing.T) {
		err := mgr.Engage(context.Background(), "broken", cl)
		t.Logf("mgr.Engage: %v", err)
		namesClusterOnce(t, err, "broken")
		if !strings.Contains(err.Error(), strconv.Quote(ctrlName)) {
			t.Errorf("the error does not name the controller %q: %v", ctrlName, err)
		}
	})
	t.Run("controller.Engage", func(t *testing.T) {
		err := c.Engage(context.Background(), "direct", cl)
		t.Logf("controller.Engage: %v", err)
		namesClusterOnce(t, err, "direct")
	})
}
