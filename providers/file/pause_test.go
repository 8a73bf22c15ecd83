package file_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcruntime/multicluster-runtime/internal/pausetest"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// The context extension multicluster-runtime.io/paused pauses the context's
// cluster without rebuilding it; removing it reconciles each held key once.
func TestPausedExtensionPausesTheContextsCluster(t *testing.T) {
	ns := testbed.Name("paused")
	member := testbed.NewClient(t, fleet.Config(1))
	testbed.CreateNamespace(t, member, ns)
	path := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	write := func(paused bool) {
		kc, err := clientcmd.Load(kubeconfig(t, map[string]int{"paused": 1, "other": 2}))
		if err != nil {
			t.Fatal(err)
		}
		if paused {
			kc.Contexts["paused"].Extensions[file.PausedExtension] = &runtime.Unknown{Raw: []byte(`"true"`), ContentType: runtime.ContentTypeJSON}
		}
		data, err := clientcmd.Write(*kc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(false)
	p, err := file.New(file.Options{KubeconfigFiles: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	mgr := fleettest.NewManager(t, fleet.Config(0), p)
	rec := &fleettest.Recorder{Namespace: ns}
	pausetest.Controller(t, mgr, rec)
	tracker := fleettest.NewTracker()
	if err := mgr.Add(tracker); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	pausetest.Scenario{
		Manager: mgr, Recorder: rec, Tracker: tracker, Cluster: path + file.DefaultSeparator + "paused",
		Member: member, Namespace: ns, SetPaused: func(_ testing.TB, paused bool) { write(paused) },
	}.Run(t)
	if n := tracker.Count(path + file.DefaultSeparator + "other"); n != 1 {
		t.Errorf("the other context's cluster was engaged %d times, want once", n)
	}
}
