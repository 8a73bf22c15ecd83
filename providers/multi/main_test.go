package multi

import (
	"testing"

	"github.com/mcruntime/multicluster-runtime/internal/testfleet"
)

// fleet is two control planes shared by the package's tests, which stay
// independent by using names of their own.
var fleet *testfleet.Fleet

func TestMain(m *testing.M) {
	testfleet.RunMain(m, 2, func(f *testfleet.Fleet) { fleet = f })
}
