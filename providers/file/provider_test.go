package file_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

func TestDirectoriesAndFilesEngageEveryContext(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "fleet")
	other := filepath.Join(root, "other")
	for _, d := range []string{dir, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeAtomically(t, filepath.Join(dir, "a.kubeconfig"), kubeconfig(t, map[string]int{"zero": 0}))
	writeAtomically(t, filepath.Join(dir, "b.yaml"), kubeconfig(t, map[string]int{"one": 1, "two": 2}))
	// Not matching the default globs, or hidden: never read.
	writeAtomically(t, filepath.Join(dir, "notes.txt"), kubeconfig(t, map[string]int{"x": 0}))
	writeAtomically(t, filepath.Join(dir, ".hidden.yaml"), kubeconfig(t, map[string]int{"y": 0}))
	explicit := filepath.Join(other, "member.conf")
	writeAtomically(t, explicit, kubeconfig(t, map[string]int{"two": 2}))

	p, err := file.New(file.Options{KubeconfigDirs: []string{dir}, KubeconfigFiles: []string{explicit}})
	if err != nil {
		t.Fatal(err)
	}
	tr := run(t, p, logr.Discard())
	engaged := fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{
		dir + "/a.kubeconfig+zero": 0,
		dir + "/b.yaml+one":        1,
		dir + "/b.yaml+two":        2,
		explicit + "+two":          2,
	})

	// Get serves the engaged clusters and wraps ErrClusterNotFound otherwise.
	for name, cl := range engaged {
		got, err := p.Get(context.Background(), name)
		if err != nil || got != cl {
			t.Errorf("Get(%q) = %v, %v; want the engaged cluster", name, got, err)
		}
	}
	if _, err := p.Get(context.Background(), dir+"/notes.txt+x"); !isNotFound(err) {
		t.Errorf("Get of an unknown cluster: %v, want ErrClusterNotFound", err)
	}
}

func TestClusterNameFunctionAndSeparator(t *testing.T) {
	dir := t.TempDir()
	writeAtomically(t, filepath.Join(dir, "fleet.kubeconfig"), kubeconfig(t, map[string]int{"zero": 0, "one": 1}))

	p, err := file.New(file.Options{KubeconfigFiles: []string{filepath.Join(dir, "fleet.kubeconfig")}, Separator: "#"})
	if err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, run(t, p, logr.Discard()), map[multicluster.ClusterName]int{
		dir + "/fleet.kubeconfig#zero": 0,
		dir + "/fleet.kubeconfig#one":  1,
	})

	named, err := file.New(file.Options{
		KubeconfigDirs: []string{dir},
		ClusterName: func(path, context string) string {
			return strings.TrimSuffix(filepath.Base(path), ".kubeconfig") + "/" + context
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, run(t, named, logr.Discard()), map[multicluster.ClusterName]int{"fleet/zero": 0, "fleet/one": 1})
}

func TestFilesAppearChangeAndDisappear(t *testing.T) {
	// The directory does not exist yet: it is picked up when it appears.
	dir := filepath.Join(t.TempDir(), "not", "yet")
	p, err := file.New(file.Options{KubeconfigDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	tr := run(t, p, logr.Discard())
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{})

	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.kubeconfig"), filepath.Join(dir, "b.kubeconfig")
	writeAtomically(t, a, kubeconfig(t, map[string]int{"main": 0}))
	before := fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{a + "+main": 0})

	// A new file engages its clusters and leaves the others alone.
	writeAtomically(t, b, kubeconfig(t, map[string]int{"main": 1}))
	after := fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{a + "+main": 0, b + "+main": 1})
	if after[a+"+main"] != before[a+"+main"] {
		t.Error("adding a file re-created a cluster of another file")
	}

	// Rewriting a file in place (not atomically) to point at another member
	// re-creates only its cluster, against the new member.
	if err := os.WriteFile(a, kubeconfig(t, map[string]int{"main": 2}), 0o600); err != nil {
		t.Fatal(err)
	}
	rewritten := fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{a + "+main": 2, b + "+main": 1})
	if rewritten[b+"+main"] != after[b+"+main"] {
		t.Error("rewriting a file re-created a cluster of another file")
	}
	if rewritten[a+"+main"] == after[a+"+main"] {
		t.Error("the rewritten file's cluster is the same instance")
	}
	tr.WaitDisengaged(t, after[a+"+main"])

	// Writing identical content keeps the cluster.
	writeAtomically(t, a, kubeconfig(t, map[string]int{"main": 2}))
	// Adding a context to b re-creates nothing already running in b.
	writeAtomically(t, b, kubeconfig(t, map[string]int{"main": 1, "extra": 0}))
	final := fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{a + "+main": 2, b + "+main": 1, b + "+extra": 0})
	if final[a+"+main"] != rewritten[a+"+main"] || final[b+"+main"] != rewritten[b+"+main"] {
		t.Error("unchanged contexts were re-created")
	}

	// Removing a context, then deleting a file, disengages their clusters.
	writeAtomically(t, b, kubeconfig(t, map[string]int{"main": 1}))
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{a + "+main": 2, b + "+main": 1})
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{b + "+main": 1})
	if _, err := p.Get(context.Background(), a+"+main"); !isNotFound(err) {
		t.Errorf("Get of a deleted file's cluster: %v, want ErrClusterNotFound", err)
	}

	// Removing the directory disengages the rest; re-creating it engages again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, b, kubeconfig(t, map[string]int{"main": 0}))
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{b + "+main": 0})
}

func TestMalformedFileLeavesOthersRunning(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.kubeconfig"), filepath.Join(dir, "bad.kubeconfig")
	const secret = "s3cr3t-t0ken-that-must-not-leak"
	writeAtomically(t, good, kubeconfig(t, map[string]int{"main": 0}))
	writeAtomically(t, bad, []byte("apiVersion: v1\nkind: Config\nusers: [{name: u, user: {token: [\""+secret+"\"]}}]\n"))

	var logs fleettest.LogBuffer
	p, err := file.New(file.Options{KubeconfigDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	tr := run(t, p, logs.Logger())
	running := fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{good + "+main": 0})
	fleettest.Eventually(t, time.Minute, func() error { // the malformed file to be reported
		if !strings.Contains(logs.String(), bad) {
			return fmt.Errorf("no log line names %s:\n%s", bad, logs.String())
		}
		return nil
	})

	// A good file turning malformed keeps its last good cluster; a new good
	// file is still picked up.
	writeAtomically(t, good, []byte("{not yaml: ["))
	newer := filepath.Join(dir, "newer.kubeconfig")
	writeAtomically(t, newer, kubeconfig(t, map[string]int{"main": 1}))
	now := fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{good + "+main": 0, newer + "+main": 1})
	if now[good+"+main"] != running[good+"+main"] {
		t.Error("the cluster of a file that turned malformed was re-created")
	}
	// Fixing the file to point elsewhere re-creates it.
	writeAtomically(t, good, kubeconfig(t, map[string]int{"main": 2}))
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{good + "+main": 2, newer + "+main": 1})

	if strings.Contains(logs.String(), secret) {
		t.Errorf("a credential leaked into the logs:\n%s", logs.String())
	}
}

func isNotFound(err error) bool {
	return errors.Is(err, multicluster.ErrClusterNotFound)
}

func TestBurstOfWritesIsCoalesced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "busy.kubeconfig")
	writeAtomically(t, path, kubeconfig(t, map[string]int{"main": 0}))
	p, err := file.New(file.Options{KubeconfigDirs: []string{dir}, Debounce: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tr := run(t, p, logr.Discard())
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{path + "+main": 0})

	// An editor-like burst: the file truncated and rewritten piecemeal,
	// pointing at each member in turn, ending at member 2. Without debouncing,
	// the provider would see torn files and intermediate members.
	contents := [][]byte{
		kubeconfig(t, map[string]int{"main": 1}),
		kubeconfig(t, map[string]int{"main": 0}),
		kubeconfig(t, map[string]int{"main": 2}),
	}
	for _, data := range contents {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		half := len(data) / 2
		for _, chunk := range [][]byte{data[:half], data[half:]} {
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // the writer's pace, not an assertion
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{path + "+main": 2})
	if n := tr.Count(path + "+main"); n != 2 {
		t.Fatalf("the burst engaged the cluster %d times in all, want 2 (initial and final content)", n)
	}
}

func TestIndexesReachPresentAndFutureClusters(t *testing.T) {
	dir := t.TempDir()
	first, later := filepath.Join(dir, "first.kubeconfig"), filepath.Join(dir, "later.kubeconfig")
	writeAtomically(t, first, kubeconfig(t, map[string]int{"main": 0}))
	p, err := file.New(file.Options{KubeconfigDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	byMember := func(obj client.Object) []string { return []string{obj.(*corev1.ConfigMap).Data["member"]} }
	// Registered before the provider runs, then after a cluster is engaged.
	if err := p.IndexField(ctx, &corev1.ConfigMap{}, "member", byMember); err != nil {
		t.Fatal(err)
	}
	tr := run(t, p, logr.Discard())
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{first + "+main": 0})
	if err := p.IndexField(ctx, &corev1.ConfigMap{}, "name", func(obj client.Object) []string { return []string{obj.GetName()} }); err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, later, kubeconfig(t, map[string]int{"main": 1}))
	engaged := fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{first + "+main": 0, later + "+main": 1})

	for name, member := range map[string]string{first + "+main": "0", later + "+main": "1"} {
		for field, value := range map[string]string{"member": member, "name": "identity"} {
			var list corev1.ConfigMapList
			if err := engaged[name].GetCache().List(ctx, &list, client.MatchingFields{field: value}); err != nil {
				t.Fatalf("cluster %q: listing by index %q: %v", name, field, err)
			}
			if len(list.Items) != 1 || list.Items[0].Name != "identity" {
				t.Fatalf("cluster %q: index %q=%q found %d ConfigMaps", name, field, value, len(list.Items))
			}
		}
	}
}
