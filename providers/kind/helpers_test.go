package kind_test

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// fleet holds the control planes shared by the package's tests.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard()) // each test logs through its manager's logger
	fleettest.RunMainWithOptions(m, 3, fleettest.Options{StartTimeout: 3 * time.Minute}, func(f *fleettest.Fleet) error {
		fleet = f
		return nil
	})
}

// kubeconfig returns a kubeconfig for control plane i, for a new user of
// its own: two calls give different credentials for the same server.
func kubeconfig(t *testing.T, i int, user string) string { return fleet.UserKubeconfig(t, i, user) }

// identity is a control plane and the kubeconfig used for it.
type identity = fleettest.Credentials

// expectEngaged waits until exactly the clusters of want are engaged, each
// reaching the given control plane as the given user.
func expectEngaged(t *testing.T, tr *fleettest.Tracker, want map[string]identity) map[string]cluster.Cluster {
	t.Helper()
	return fleet.ExpectEngagedWith(t, tr, want)
}
