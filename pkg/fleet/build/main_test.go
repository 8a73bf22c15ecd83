package build_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	// A stopped metadata-only informer (TestNewClusterCachesNoFieldManagement)
	// leaves apimachinery's watch.Filter goroutine blocked on a send: an
	// upstream leak (filter.go has no stop path), not one of ours.
	fleettest.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f },
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"))
}
