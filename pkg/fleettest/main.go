package fleettest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// RunMain is a TestMain body: it starts a shared fleet of n control planes,
// hands it to use, runs the package's tests, stops the fleet and then fails
// the run if goroutines were leaked. It does not return.
func RunMain(m *testing.M, n int, use func(*Fleet), leakOptions ...goleak.Option) {
	RunMainWithOptions(m, n, Options{}, func(f *Fleet) error { use(f); return nil }, leakOptions...)
}

// RunMainWithOptions is RunMain with fleet options and a set-up step that may
// fail (the fleet is then stopped and the run fails).
func RunMainWithOptions(m *testing.M, n int, opts Options, setup func(*Fleet) error, leakOptions ...goleak.Option) {
	f, err := Start(n, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if err := setup(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	if err := f.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(leakOptions...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
