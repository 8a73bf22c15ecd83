package upstream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// fleet is the package's control planes: 0 is the host, 1 and 2 members.
var (
	fleet *fleettest.Fleet
	bins  string // the directory the programs are built into
)

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	dir, err := os.MkdirTemp("", "upstream-examples")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins = dir
	defer os.RemoveAll(dir)
	fleettest.RunMain(m, 3, func(f *fleettest.Fleet) { fleet = f })
}

var built sync.Map // program → error of its build

// program builds the program in directory pkg (once) and returns its path.
func program(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(bins, filepath.Base(pkg))
	once, _ := built.LoadOrStore(pkg, sync.OnceValue(func() error { return testbed.BuildProgram("./"+pkg, bin) }))
	if err := once.(func() error)(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// run starts the program in pkg with the host's kubeconfig and args, and
// stops it (SIGTERM, as a pod is stopped) when the test ends; a program that
// does not exit cleanly fails the test.
func run(t *testing.T, pkg string, args ...string) *testbed.Output {
	t.Helper()
	bin := program(t, pkg)
	kubeconfig := filepath.Join(t.TempDir(), "host.kubeconfig")
	if err := fleet.WriteKubeconfig(0, kubeconfig, "host"); err != nil {
		t.Fatal(err)
	}
	return testbed.RunProgram(t, bin, []string{"KUBECONFIG=" + kubeconfig}, args...)
}

// waitForLine waits until the program printed a line holding every one of
// parts.
func waitForLine(t *testing.T, out *testbed.Output, parts ...string) {
	t.Helper()
	fleettest.Eventually(t, time.Minute, func() error {
		for line := range strings.SplitSeq(out.String(), "\n") {
			if holdsAll(line, parts) {
				return nil
			}
		}
		return fmt.Errorf("no line printed holds all of %q; the program printed:\n%s", parts, out.String())
	})
}

func holdsAll(line string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(line, p) {
			return false
		}
	}
	return true
}

func quoted(key, value string) string { return fmt.Sprintf("%q=%q", key, value) }

// kubeconfigSecret stores member i's kubeconfig in the host as the
// kubeconfig provider reads it, until the test ends.
func kubeconfigSecret(t *testing.T, i int, name string) {
	t.Helper()
	kc, err := fleet.Kubeconfig(i, name)
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Labels: map[string]string{"sigs.k8s.io/multicluster-runtime-kubeconfig": "true"}},
		Data: map[string][]byte{"kubeconfig": kc},
	}
	host := testbed.NewClient(t, fleet.Config(0))
	if err := host.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Delete(context.Background(), s) })
}

func createConfigMap(t *testing.T, i int, namespace, name string) {
	t.Helper()
	c := testbed.NewClient(t, fleet.Config(i))
	if namespace != "default" {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
		if err := c.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	cm := testbed.ConfigMap(namespace, name)
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cm) })
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	for _, i := range []int{1, 2} {
		if err := fleet.WriteKubeconfig(i, filepath.Join(dir, fmt.Sprintf("m%d.kubeconfig", i)), fmt.Sprintf("m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	out := run(t, "file", "-kubeconfig-dirs", dir)
	createConfigMap(t, 1, "default", "hello-file")
	createConfigMap(t, 2, "default", "hello-file")
	for _, i := range []int{1, 2} {
		name := filepath.Join(dir, fmt.Sprintf("m%d.kubeconfig", i)) + fmt.Sprintf("+m%d", i)
		waitForLine(t, out, `"msg"="ConfigMap found"`, quoted("cluster", name), quoted("name", "hello-file"))
	}
}

func TestKubeconfig(t *testing.T) {
	out := run(t, "kubeconfig")
	kubeconfigSecret(t, 1, "member-1")
	createConfigMap(t, 1, "default", "hello-kubeconfig")
	waitForLine(t, out, `"msg"="ConfigMap found"`, quoted("cluster", "member-1"), quoted("name", "hello-kubeconfig"),
		quoted("userAgent", "upstream-kubeconfig-example"), `"clusters"=1`)
}

func TestNamespace(t *testing.T) {
	out := run(t, "namespace")
	createConfigMap(t, 0, "upstream-ns", "hello-namespace")
	waitForLine(t, out, `"msg"="ConfigMap found"`, quoted("cluster", "upstream-ns"), quoted("name", "hello-namespace"),
		quoted("backingNamespace", "upstream-ns"))
}

func TestSyncLocalToRemote(t *testing.T) {
	out := run(t, "sync-local-to-remote")
	kubeconfigSecret(t, 1, "sync-1")
	kubeconfigSecret(t, 2, "sync-2")
	createConfigMap(t, 0, "sync", "shared-settings")
	for _, i := range []int{1, 2} {
		c := testbed.NewClient(t, fleet.Config(i))
		fleettest.Eventually(t, time.Minute, func() error {
			cm := &corev1.ConfigMap{}
			err := c.Get(context.Background(), client.ObjectKey{Namespace: "sync", Name: "shared-settings"}, cm)
			if err == nil && cm.Data["k"] == "v" {
				return nil
			}
			return fmt.Errorf("member %d has no copy of sync/shared-settings (%v); the program printed:\n%s", i, err, out.String())
		})
	}
}

func TestRegistry(t *testing.T) {
	dir := t.TempDir()
	for _, i := range []int{1, 2} {
		if err := fleet.WriteKubeconfig(i, filepath.Join(dir, fmt.Sprintf("r%d.kubeconfig", i)), fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	name := func(i int) string {
		return filepath.Join(dir, fmt.Sprintf("r%d.kubeconfig", i)) + fmt.Sprintf("+r%d", i)
	}
	out := run(t, "registry", "-kubeconfig-dir", dir)
	waitForLine(t, out, `"msg"="Engaged clusters"`, quoted("names", fmt.Sprintf("[%s %s]", name(1), name(2))),
		name(1)+"="+fleet.Config(1).Host, name(2)+"="+fleet.Config(2).Host)
	// A cluster that leaves the fleet leaves the registry.
	if err := os.Remove(filepath.Join(dir, "r2.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	waitForLine(t, out, `"msg"="Engaged clusters"`, quoted("names", fmt.Sprintf("[%s]", name(1))))
}

// Three replicas share the namespaces of one API server: once they have
// settled, each namespace's change is reconciled by exactly one replica.
func TestShardedNamespaceThreeReplicas(t *testing.T) {
	const n = 12
	c := testbed.NewClient(t, fleet.Config(0))
	for i := range n {
		createConfigMap(t, 0, fmt.Sprintf("shard-%d", i), "probe")
	}
	outs := map[string]*testbed.Output{}
	for _, r := range []string{"r1", "r2", "r3"} {
		outs[r] = run(t, "sharded-namespace", "-replica", r)
	}
	line := regexp.MustCompile(`"replica"="(r\d)".*"cluster"="(shard-\d+)".*"round"="(\d+)"`)
	// seen returns, for round, the replicas that reconciled each namespace.
	seen := func(round int) map[string]map[string]bool {
		by := map[string]map[string]bool{}
		for _, out := range outs {
			for _, m := range line.FindAllStringSubmatch(out.String(), -1) {
				if m[3] != fmt.Sprint(round) {
					continue
				}
				if by[m[2]] == nil {
					by[m[2]] = map[string]bool{}
				}
				by[m[2]][m[1]] = true
			}
		}
		return by
	}
	setRound := func(round int) {
		for i := range n {
			cm := &corev1.ConfigMap{}
			key := client.ObjectKey{Namespace: fmt.Sprintf("shard-%d", i), Name: "probe"}
			if err := c.Get(context.Background(), key, cm); err != nil {
				t.Fatal(err)
			}
			cm.Data = map[string]string{"round": fmt.Sprint(round)}
			if err := c.Update(context.Background(), cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitRound := func(round int) {
		fleettest.Eventually(t, 2*time.Minute, func() error {
			if got := seen(round); len(got) < n {
				return fmt.Errorf("round %d: only %d of %d namespaces reconciled: %v", round, len(got), n, got)
			}
			return nil
		})
	}
	// Replicas join one by one and hand clusters over while they do; a round
	// is judged once the next one was reconciled everywhere, so that a late
	// reconcile of it by a second replica would have been seen.
	setRound(1)
	waitRound(1)
	for round := 2; round <= 20; round++ {
		setRound(round)
		waitRound(round)
		prev := seen(round - 1)
		owners := map[string]bool{}
		unique := true
		for _, replicas := range prev {
			if len(replicas) != 1 {
				unique = false
			}
			for r := range replicas {
				owners[r] = true
			}
		}
		if unique && len(owners) >= 2 {
			t.Logf("round %d: each of %d namespaces reconciled by one replica, %d replicas sharing them", round-1, n, len(owners))
			return
		}
		t.Logf("round %d: not settled yet: %v", round-1, prev)
	}
	t.Fatalf("the replicas never settled on one replica per namespace; last round: %v", seen(19))
}
