package testfleet

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

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
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

func findAssets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" && fleettest.HasBinaries(dir) {
		return dir, nil
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testfleet: cannot locate the repository to run hack/envtest-assets.sh; set KUBEBUILDER_ASSETS")
	}
	script := filepath.Join(filepath.Dir(self), "..", "..", "hack", "envtest-assets.sh")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testfleet: %s failed: %w\n%s", script, err, stderr.String())
	}
	dir := strings.TrimSpace(stdout.String())
	if !fleettest.HasBinaries(dir) {
		return "", fmt.Errorf("testfleet: %s printed %q, which does not hold kube-apiserver and etcd", script, dir)
	}
	return dir, nil
}
