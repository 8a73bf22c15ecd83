package testfleet

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// The fleet types are the public test kit's.
type (
	Fleet   = fleettest.Fleet
	Options = fleettest.Options
)

// IdentityConfigMap is fleettest.IdentityConfigMap.
const IdentityConfigMap = fleettest.IdentityConfigMap

// KubeconfigFor is fleettest.KubeconfigFor.
var KubeconfigFor = fleettest.KubeconfigFor

// withAssets fills opts.BinaryAssetsDirectory, provisioning the binaries when
// neither opts nor KUBEBUILDER_ASSETS name them.
func withAssets(opts Options) (Options, error) {
	if opts.BinaryAssetsDirectory != "" {
		return opts, nil
	}
	dir, err := AssetsDir()
	opts.BinaryAssetsDirectory = dir
	return opts, err
}

// Start is fleettest.Start with provisioned binaries.
func Start(n int, opts Options) (*Fleet, error) {
	opts, err := withAssets(opts)
	if err != nil {
		return nil, err
	}
	return fleettest.Start(n, opts)
}

// New is fleettest.New with provisioned binaries.
func New(t testing.TB, n int) *Fleet {
	t.Helper()
	opts, err := withAssets(Options{})
	if err != nil {
		t.Fatal(err)
	}
	return fleettest.NewWithOptions(t, n, opts)
}

// RunMain is fleettest.RunMain with provisioned binaries.
func RunMain(m *testing.M, n int, use func(*Fleet), leakOptions ...goleak.Option) {
	RunMainWithOptions(m, n, Options{}, func(f *Fleet) error { use(f); return nil }, leakOptions...)
}

// RunMainWithOptions is fleettest.RunMainWithOptions with provisioned binaries.
func RunMainWithOptions(m *testing.M, n int, opts Options, setup func(*Fleet) error, leakOptions ...goleak.Option) {
	opts, err := withAssets(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fleettest.RunMainWithOptions(m, n, opts, setup, leakOptions...)
}
