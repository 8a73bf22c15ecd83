package fleettest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Fleet is a set of running control planes, one envtest environment each.
// Members are numbered from 0; their configs authenticate as an administrator.
type Fleet struct {
	mu      sync.Mutex
	envs    []*envtest.Environment
	configs []*rest.Config
	stopped []bool
	faults  []*Faults // started by Faults, stopped with their member
}

// Options tune a fleet. The zero value is ready to use.
type Options struct {
	// StartTimeout bounds the start-up of each control plane. Defaults to 2 minutes,
	// which leaves room for several control planes starting on two cores.
	StartTimeout time.Duration

	// APIServerFlags are extra kube-apiserver flags (name without "--" to value),
	// e.g. {"max-requests-inflight": "2000"} for benchmarks with many clients.
	APIServerFlags map[string]string

	// BinaryAssetsDirectory holds the kube-apiserver and etcd binaries. Defaults
	// to $KUBEBUILDER_ASSETS, then to envtest's default /usr/local/kubebuilder/bin.
	// controller-runtime's setup-envtest fills such a directory:
	//
	//	go run sigs.k8s.io/controller-runtime/tools/setup-envtest@latest use -p path 1.37.x
	BinaryAssetsDirectory string
}

// defaultAssetsDirectory is where envtest looks when nothing else is set.
const defaultAssetsDirectory = "/usr/local/kubebuilder/bin"

// assetsDirectory resolves opts.BinaryAssetsDirectory and checks that it holds
// the binaries, so that a missing binary is reported before n control planes
// each fail with a less helpful message.
func (opts Options) assetsDirectory() (string, error) {
	dir, from := opts.BinaryAssetsDirectory, "Options.BinaryAssetsDirectory"
	if dir == "" {
		dir, from = os.Getenv("KUBEBUILDER_ASSETS"), "$KUBEBUILDER_ASSETS"
	}
	if dir == "" {
		dir, from = defaultAssetsDirectory, "the default directory"
	}
	if !HasBinaries(dir) {
		return "", fmt.Errorf("fleettest: %s %q does not hold kube-apiserver and etcd; "+
			"fetch them with controller-runtime's setup-envtest and set KUBEBUILDER_ASSETS to the directory it prints", from, dir)
	}
	return dir, nil
}

// HasBinaries reports whether dir holds the kube-apiserver and etcd binaries.
func HasBinaries(dir string) bool {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}

// Start starts n control planes in parallel and returns once all are serving.
// If any fails, the others are stopped and the error names the failed members.
// The caller stops the fleet with Stop.
func Start(n int, opts Options) (*Fleet, error) {
	if n < 1 {
		return nil, fmt.Errorf("fleettest: need at least one control plane, got %d", n)
	}
	dir, err := opts.assetsDirectory()
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
		return nil, fmt.Errorf("fleettest: %w", err)
	}
	return f, nil
}

// New starts a fleet of n control planes for one test and stops it when the
// test ends.
func New(t testing.TB, n int) *Fleet {
	t.Helper()
	return NewWithOptions(t, n, Options{})
}

// NewWithOptions is New with options.
func NewWithOptions(t testing.TB, n int, opts Options) *Fleet {
	t.Helper()
	f, err := Start(n, opts)
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
	var faults *Faults
	if f.faults != nil {
		faults, f.faults[i] = f.faults[i], nil
	}
	f.mu.Unlock()
	if faults != nil {
		faults.close()
	}
	if already {
		return nil
	}
	if err := f.envs[i].Stop(); err != nil {
		return fmt.Errorf("fleettest: stopping control plane %d: %w", i, err)
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

// AddUser provisions a new user on member i and returns a config that
// authenticates as it, with its own client certificate: two users of the same
// member reach the same server with different credentials, as after a
// credential rotation. Give the user Groups []string{"system:masters"} for an
// administrator, or none to test with the permissions of an RBAC binding.
func (f *Fleet) AddUser(i int, user envtest.User) (*rest.Config, error) {
	u, err := f.envs[i].AddUser(user, nil)
	if err != nil {
		return nil, fmt.Errorf("fleettest: adding user %q to control plane %d: %w", user.Name, i, err)
	}
	cfg := rest.CopyConfig(u.Config())
	cfg.QPS, cfg.Burst = 1000, 2000 // as Config: see Start
	return cfg, nil
}
