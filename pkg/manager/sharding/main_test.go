package sharding_test

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// host is the API server that holds every test's Leases; tests keep apart by
// using their own group names.
var host *rest.Config

func TestMain(m *testing.M) {
	if os.Getenv(replicaEnv) != "" {
		os.Exit(replicaMain()) // re-executed as a replica by TestSeparateProcesses
	}
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 1, func(f *fleettest.Fleet) { host = f.Config(0) })
}
