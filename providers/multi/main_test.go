package multi

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcruntime/multicluster-runtime/internal/testfleet"
)

// fleet is two control planes shared by the package's tests, which stay
// independent by using names of their own.
var fleet *testfleet.Fleet

type withFleet struct{ m *testing.M }

func (w withFleet) Run() int {
	f, err := testfleet.Start(2, testfleet.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fleet = f
	code := w.m.Run()
	if err := f.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withFleet{m})
}
