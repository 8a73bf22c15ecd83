package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f })
}

// The directory is the fleet: files appear and go, and a file that refers to
// local files is refused while the others are served.
func TestDirectoryIsTheFleet(t *testing.T) {
	dir := t.TempDir()
	for i, name := range []string{"alpha", "beta"} {
		if err := fleet.WriteKubeconfig(i, filepath.Join(dir, name+".kubeconfig"), name); err != nil {
			t.Fatal(err)
		}
	}
	// A kubeconfig that reads credentials from local files: valid for member 1,
	// so only the refusal keeps it out of the fleet.
	cfg := fleet.Config(1)
	for name, data := range map[string][]byte{"ca.crt": cfg.CAData, "client.crt": cfg.CertData, "client.key": cfg.KeyData} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	local := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {client-certificate: %q, client-key: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, cfg.Host, filepath.Join(dir, "ca.crt"), filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err := os.WriteFile(filepath.Join(dir, "local.kubeconfig"), []byte(local), 0o600); err != nil {
		t.Fatal(err)
	}

	p := NewProvider(dir, 100*time.Millisecond)
	mgr := fleettest.NewManager(t, fleet.Config(0), p)
	tr := fleettest.NewTracker()
	if err := mgr.Add(tr); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	engaged := func(want ...string) func() error {
		return func() error {
			var got []string
			for name := range tr.Engaged() {
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("engaged %v, want %v", got, want)
			}
			return nil
		}
	}
	fleettest.Eventually(t, time.Minute, engaged("alpha", "beta"))

	if err := os.Remove(filepath.Join(dir, "alpha.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, time.Minute, engaged("beta"))
	if tr.Count("local") != 0 {
		t.Fatal("a kubeconfig reading local files was engaged")
	}
}
