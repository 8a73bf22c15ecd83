package file_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// swapBound bounds how long a swap may take to be seen: a few debounces
// and the start of a cluster's cache on a loaded machine.
const swapBound = 20 * time.Second

// expectSwapped waits until exactly want is engaged in tr, and fails the
// test if that took longer than swapBound after the swap.
func expectSwapped(t *testing.T, tr *fleettest.Tracker, want map[multicluster.ClusterName]int) {
	t.Helper()
	swapped := time.Now()
	fleettest.ExpectEngaged(t, tr, want)
	if took := time.Since(swapped); took > swapBound {
		t.Errorf("the swap was seen after %s, want within %s", took, swapBound)
	}
}

// swapLink points the symlink link at target atomically, as kubelet and
// deployment tools do: a new link renamed over the old one.
func swapLink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".tmp"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

// A watched directory that is a symlink swapped atomically to another
// target: the new target's kubeconfigs are engaged and the old ones removed,
// and a change in the new target is followed afterwards.
func TestWatchedDirectorySymlinkSwapped(t *testing.T) {
	root := t.TempDir()
	v1, v2, current := filepath.Join(root, "v1"), filepath.Join(root, "v2"), filepath.Join(root, "current")
	mkdirs(t, v1, v2)
	writeAtomically(t, filepath.Join(v1, "a.kubeconfig"), kubeconfig(t, map[string]int{"main": 0}))
	writeAtomically(t, filepath.Join(v2, "b.kubeconfig"), kubeconfig(t, map[string]int{"main": 1}))
	if err := os.Symlink("v1", current); err != nil {
		t.Fatal(err)
	}
	p, err := file.New(file.Options{KubeconfigDirs: []string{current}, Debounce: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tr := run(t, p, logr.Discard())
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{current + "/a.kubeconfig+main": 0})

	swapLink(t, "v2", current)
	expectSwapped(t, tr, map[multicluster.ClusterName]int{current + "/b.kubeconfig+main": 1})

	// The new target is the one watched now.
	writeAtomically(t, filepath.Join(v2, "c.kubeconfig"), kubeconfig(t, map[string]int{"main": 2}))
	expectSwapped(t, tr, map[multicluster.ClusterName]int{current + "/b.kubeconfig+main": 1, current + "/c.kubeconfig+main": 2})
	// A swap back to the first target, written to meanwhile.
	writeAtomically(t, filepath.Join(v1, "d.kubeconfig"), kubeconfig(t, map[string]int{"main": 0}))
	swapLink(t, "v1", current)
	expectSwapped(t, tr, map[multicluster.ClusterName]int{current + "/a.kubeconfig+main": 0, current + "/d.kubeconfig+main": 0})
}

// The kubelet's atomic-writer layout of a mounted Secret or ConfigMap, the
// way kubeconfigs reach a controller in a pod: each top-level entry of the
// volume is a symlink into ..data, itself a symlink to a timestamped
// directory, and an update writes a new timestamped directory and swaps
// ..data to it. A key given a path in a subdirectory (items: path:
// clusters/fleet.kubeconfig) makes that subdirectory a symlink into ..data.
// Followed: the mount directory, one of its files given by path, and the
// subdirectory; the mount is reached through a symlink of its own, as a
// projected path may be.
func TestKubeletAtomicWriterLayout(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "volumes", "kubeconfigs")
	mount := filepath.Join(root, "etc-kubeconfigs")
	mkdirs(t, real)
	if err := os.Symlink(real, mount); err != nil {
		t.Fatal(err)
	}
	writeVersion := func(version string, contexts map[string]int) {
		dir := filepath.Join(real, version)
		mkdirs(t, filepath.Join(dir, "clusters"))
		for _, f := range []string{"kubeconfig", "clusters/fleet.kubeconfig"} {
			if err := os.WriteFile(filepath.Join(dir, f), kubeconfig(t, contexts), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	const first, second = "..2026_12_01_10_00_00.000000001", "..2026_12_01_10_05_00.000000002"
	writeVersion(first, map[string]int{"old": 0})
	for link, target := range map[string]string{"..data": first, "kubeconfig": "..data/kubeconfig", "clusters": "..data/clusters"} {
		if err := os.Symlink(target, filepath.Join(real, link)); err != nil {
			t.Fatal(err)
		}
	}
	sub := filepath.Join(mount, "clusters")
	kinds := []struct {
		opts file.Options
		file string // the clusters' file
	}{
		{file.Options{KubeconfigDirs: []string{mount}}, filepath.Join(mount, "kubeconfig")},
		{file.Options{KubeconfigFiles: []string{filepath.Join(mount, "kubeconfig")}}, filepath.Join(mount, "kubeconfig")},
		{file.Options{KubeconfigDirs: []string{sub}}, filepath.Join(sub, "fleet.kubeconfig")},
	}
	trs := make([]*fleettest.Tracker, len(kinds))
	for i, k := range kinds {
		k.opts.Debounce = 50 * time.Millisecond
		p, err := file.New(k.opts)
		if err != nil {
			t.Fatal(err)
		}
		trs[i] = run(t, p, logr.Discard())
	}
	for i, k := range kinds {
		fleettest.ExpectEngaged(t, trs[i], map[multicluster.ClusterName]int{k.file + "+old": 0})
	}

	// What kubelet does on an update of the Secret.
	writeVersion(second, map[string]int{"new": 1})
	swapLink(t, second, filepath.Join(real, "..data"))
	if err := os.RemoveAll(filepath.Join(real, first)); err != nil {
		t.Fatal(err)
	}
	for i, k := range kinds {
		expectSwapped(t, trs[i], map[multicluster.ClusterName]int{k.file + "+new": 1})
	}
}
