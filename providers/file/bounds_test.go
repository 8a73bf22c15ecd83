package file_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// Issue 40: a value from a source object is bounded in every line it goes
// into. A context name is written by whoever writes the kubeconfig (a
// mounted Secret or ConfigMap): one of 100 KB is refused as a cluster name,
// and the line that says so quotes a bounded part of it, not all of it,
// while the file's other contexts are engaged.
func TestHugeContextNameIsReportedBounded(t *testing.T) {
	const size, longest = 100 << 10, 4 << 10
	huge := strings.Repeat("h", size)
	dir := t.TempDir()
	path := filepath.Join(dir, "fleet.yaml")
	writeAtomically(t, path, kubeconfig(t, map[string]int{"ok": 0, huge: 1}))

	logs := &fleettest.LogBuffer{}
	p, err := file.New(file.Options{KubeconfigFiles: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, run(t, p, logs.Logger()), map[multicluster.ClusterName]int{path + "+ok": 0})
	waitForLog(t, logs, "invalid cluster name")
	for _, line := range strings.Split(logs.String(), "\n") {
		if len(line) > longest {
			t.Errorf("a log line of %d bytes, want at most %d: %.300s...", len(line), longest, line)
		}
	}
}
