package testfleet

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Fleet is a set of running control planes, one envtest environment each.
type Fleet struct {
	mu      sync.Mutex
	envs    []*envtest.Environment
	configs []*rest.Config
	stopped []bool
}

// Options tune a fleet. The zero value is ready to use.
type Options struct {
	// StartTimeout bounds the start-up of each control plane. Defaults to 2 minutes,
	// which leaves room for several control planes starting on two cores.
	StartTimeout time.Duration

	// APIServerFlags are extra kube-apiserver flags (name without "--" to value),
	// e.g. {"max-requests-inflight": "2000"} for benchmarks with many clients.
	APIServerFlags map[string]string
}

// Start starts n control planes in parallel and returns once all are serving.
// If any fails, the others are stopped and the error names the failed members.
func Start(n int, opts Options) (*Fleet, error) {
	if n < 1 {
		return nil, fmt.Errorf("testfleet: need at least one control plane, got %d", n)
	}
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	f := &Fleet{
		envs:    make([]*envtest.Environment, n),
		configs: make([]*rest.Config, n),
		stopped: make([]bool, n),
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		f.envs[i] = &envtest.Environment{
			BinaryAssetsDirectory:    dir,
			ControlPlaneStartTimeout: opts.StartTimeout,
			ControlPlaneStopTimeout:  time.Minute,
		}
		for name, value := range opts.APIServerFlags {
			f.envs[i].ControlPlane.GetAPIServer().Configure().Set(name, value)
		}
		wg.Go(func() {
			cfg, err := f.envs[i].Start()
			if err != nil {
				errs[i] = fmt.Errorf("control plane %d: %w", i, err)
				return
			}
			// Tests create many objects quickly; the client-go defaults (5 QPS) would
			// make throttling, not the code under test, the thing they measure.
			cfg.QPS, cfg.Burst = 1000, 2000
			f.configs[i] = cfg
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, cfg := range f.configs {
			if cfg != nil {
				_ = f.envs[i].Stop()
			}
		}
		return nil, fmt.Errorf("testfleet: %w", err)
	}
	return f, nil
}

// New starts a fleet of n control planes for one test and stops it when the
// test ends.
func New(t testing.TB, n int) *Fleet {
	t.Helper()
	f, err := Start(n, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	return f
}

// Len is the number of control planes in the fleet.
func (f *Fleet) Len() int { return len(f.envs) }

// Config returns a copy of member i's admin config.
func (f *Fleet) Config(i int) *rest.Config { return rest.CopyConfig(f.configs[i]) }

// Configs returns copies of every member's admin config, in member order.
func (f *Fleet) Configs() []*rest.Config {
	out := make([]*rest.Config, len(f.configs))
	for i := range f.configs {
		out[i] = f.Config(i)
	}
	return out
}

// StopMember stops member i, leaving its config pointing at a dead endpoint:
// what an unreachable cluster looks like to a client.
func (f *Fleet) StopMember(i int) error {
	f.mu.Lock()
	already := f.stopped[i]
	f.stopped[i] = true
	f.mu.Unlock()
	if already {
		return nil
	}
	if err := f.envs[i].Stop(); err != nil {
		return fmt.Errorf("testfleet: stopping control plane %d: %w", i, err)
	}
	return nil
}

// Stop stops every member that is still running, in parallel.
func (f *Fleet) Stop() error {
	errs := make([]error, len(f.envs))
	var wg sync.WaitGroup
	for i := range f.envs {
		wg.Go(func() { errs[i] = f.StopMember(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
