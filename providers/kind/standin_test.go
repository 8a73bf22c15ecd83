package kind_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/providers/kind"
)

// standIn builds the docker stand-in (internal/dockerstandin) first on PATH,
// answering for the clusters whose admin kubeconfigs are in the returned
// directory, until the test ends.
func standIn(t *testing.T) (state string) {
	t.Helper()
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "docker"), "./internal/dockerstandin").CombinedOutput(); err != nil {
		t.Fatalf("building the docker stand-in: %v\n%s", err, out)
	}
	state = t.TempDir()
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("KIND_STANDIN_DIR", state)
	return state
}

// createKindCluster makes the stand-in answer for cluster name with
// kubeconfig (as if kind created it), and returns the kubeconfig as kind
// gives it back (the server without envtest's trailing slash), or forgets the
// cluster (deleted) when kubeconfig is empty.
func createKindCluster(t *testing.T, state, name, kubeconfig string) string {
	t.Helper()
	path := filepath.Join(state, name+".admin.conf")
	if kubeconfig == "" {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		return ""
	}
	kc, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.Server = strings.TrimSuffix(c.Server, "/")
	}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The provider's default lister, the kind library, driving the container
// runtime's CLI: it detects the runtime, lists clusters by kind's label,
// finds each one's control-plane node, reads the node's admin kubeconfig and
// the API server's published address, as with Docker.
func TestTheKindLibraryPath(t *testing.T) {
	state := standIn(t)
	kcA := createKindCluster(t, state, "fleet-a", kubeconfig(t, 1, "standin-a"))
	kcB := createKindCluster(t, state, "fleet-b", kubeconfig(t, 2, "standin-b"))
	p := kind.New(kind.Options{Interval: 100 * time.Millisecond}) // no Lister: the kind library's
	tr := run(t, p)
	first := expectEngaged(t, tr, map[string]identity{"fleet-a": {Member: 1, Kubeconfig: kcA}, "fleet-b": {Member: 2, Kubeconfig: kcB}})

	// Deleted: withdrawn.
	createKindCluster(t, state, "fleet-a", "")
	expectEngaged(t, tr, map[string]identity{"fleet-b": {Member: 2, Kubeconfig: kcB}})

	// Created again, with new certificates: engaged again, a new instance.
	kcA2 := createKindCluster(t, state, "fleet-a", kubeconfig(t, 1, "standin-a-again"))
	again := expectEngaged(t, tr, map[string]identity{"fleet-a": {Member: 1, Kubeconfig: kcA2}, "fleet-b": {Member: 2, Kubeconfig: kcB}})
	if again["fleet-a"] == first["fleet-a"] {
		t.Error("the re-created cluster was not engaged anew")
	}
	if again["fleet-b"] != first["fleet-b"] {
		t.Error("re-creating fleet-a replaced fleet-b")
	}
}

// The upstream design's kind example, run as a program through the
// stand-in: it reconciles the ConfigMaps of the kind clusters it finds.
func TestUpstreamKindExample(t *testing.T) {
	state := standIn(t)
	createKindCluster(t, state, "upstream", kubeconfig(t, 2, "standin-upstream"))
	bin := filepath.Join(t.TempDir(), "kind-example")
	if err := testbed.BuildProgram("./examples/upstream", bin); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(t.TempDir(), "host.kubeconfig")
	if err := fleet.WriteKubeconfig(0, host, "host"); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	out := testbed.RunProgram(t, bin, []string{"KUBECONFIG=" + host})
	c, err := client.New(fleet.Config(2), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello-kind"}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cm) })
	fleettest.Eventually(t, time.Minute, func() error {
		for line := range strings.SplitSeq(out.String(), "\n") {
			if strings.Contains(line, `"msg"="ConfigMap found"`) && strings.Contains(line, `"cluster"="upstream"`) && strings.Contains(line, `"name"="hello-kind"`) {
				return nil
			}
		}
		return errors.New("the example has not reconciled default/hello-kind in cluster upstream yet")
	})
	t.Logf("reconciled %s after the program started", time.Since(started).Round(time.Millisecond))
}
