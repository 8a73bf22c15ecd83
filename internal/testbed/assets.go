package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

var (
	assetsOnce sync.Once
	assetsDir  string
	assetsErr  error
)

// AssetsDir returns the directory holding kube-apiserver and etcd, building
// them with hack/envtest-assets.sh when KUBEBUILDER_ASSETS does not name one.
func AssetsDir() (string, error) {
	assetsOnce.Do(func() { assetsDir, assetsErr = findAssets() })
	return assetsDir, assetsErr
}

// ProvideAssets points KUBEBUILDER_ASSETS at the control-plane binaries (see
// AssetsDir), so that pkg/fleettest finds them the way it does in a user's
// project, and a plain `go test` works as well as `make test`.
func ProvideAssets() error {
	dir, err := AssetsDir()
	if err != nil {
		return err
	}
	return os.Setenv("KUBEBUILDER_ASSETS", dir)
}

// MustProvideAssets is ProvideAssets for a TestMain: it exits the process if
// the binaries cannot be had.
func MustProvideAssets() {
	if err := ProvideAssets(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// hasBinaries is fleettest.HasBinaries, which this package cannot import.
func hasBinaries(dir string) bool {
	if dir == "" {
		return false
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}

func findAssets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); hasBinaries(dir) {
		return dir, nil
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testbed: cannot locate the repository to run hack/envtest-assets.sh; set KUBEBUILDER_ASSETS")
	}
	script := filepath.Join(filepath.Dir(self), "..", "..", "hack", "envtest-assets.sh")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testbed: %s failed: %w\n%s", script, err, stderr.String())
	}
	dir := strings.TrimSpace(stdout.String())
	if !hasBinaries(dir) {
		return "", fmt.Errorf("testbed: %s printed %q, which does not hold kube-apiserver and etcd", script, dir)
	}
	return dir, nil
}
