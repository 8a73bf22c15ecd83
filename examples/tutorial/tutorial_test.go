package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcruntime/multicluster-runtime/internal/testfleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig/onboard"
)

// fleet is the package's fleet of real control planes: 0 is the hub that runs
// the controller and holds the kubeconfig Secrets, 1 a member.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // the tests' own clients log nothing
	testfleet.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f })
}

const page = "../../docs/getting-started/tutorial.md"

// The tutorial's commands, run as a reader would in an empty directory outside
// the workspace, build the page's main.go; the program then reconciles a
// member's ConfigMaps and reports ready on its probe port.
func TestTutorialBuildsOutsideTheWorkspace(t *testing.T) {
	start := time.Now()
	bin := buildTutorial(t)
	t.Logf("the tutorial module built outside the workspace in %v", time.Since(start).Round(time.Second))

	ctx := t.Context()
	host := newClient(t, fleet.Config(0))
	registerMember(t, host, "tutorial-local", "member-1")
	kubeconfigPath := writeKubeconfig(t, fleet.Config(0))
	probes := freeAddr(t)
	ctl := startController(t, bin, kubeconfigPath, "-namespace", "tutorial-local",
		"-metrics-bind-address", "0", "-health-probe-bind-address", probes)

	member := newClient(t, fleet.Config(1))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tutorial-hello"}, Data: map[string]string{"greeting": "hi"}}
	if err := member.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, time.Minute, func() error {
		if !ctl.has(`"msg":"reconciled ConfigMap"`, `"cluster":"member-1"`, `"name":"tutorial-hello"`) {
			return fmt.Errorf("no reconcile of member-1's default/tutorial-hello logged:\n%s", ctl)
		}
		return nil
	})
	// The probes the Deployment points at: readiness (the manager's
	// "clusters" check) and liveness.
	for _, path := range []string{"/readyz", "/readyz/clusters", "/healthz"} {
		fleettest.Eventually(t, 30*time.Second, func() error {
			resp, err := http.Get("http://" + probes + path)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", path, resp.Status)
			}
			return nil
		})
	}
}

// buildTutorial runs the page's shell blocks in a temporary directory, with
// no workspace and MCR naming this checkout, and returns the binary built.
func buildTutorial(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "MCR="+checkout, "GOWORK=off", "GOFLAGS=-mod=mod")
	run := func(dir, script string) {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("in %s:\n%s\n%v\n%s", dir, script, err, out)
		}
	}
	run(dir, fencedBlock(t, text, "<!-- tutorial-test: new-module -->", "sh"))
	module := filepath.Join(dir, "fleet-controller")
	if err := os.WriteFile(filepath.Join(module, "main.go"), []byte(fencedBlock(t, text, "<!-- snippet:tutorial-main -->", "go")), 0o644); err != nil {
		t.Fatal(err)
	}
	run(module, fencedBlock(t, text, "<!-- tutorial-test: build -->", "sh"))
	gomod, err := os.ReadFile(filepath.Join(module, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "replace github.com/mcruntime/multicluster-runtime => " + checkout; !strings.Contains(string(gomod), want) {
		t.Fatalf("go.mod of the tutorial module lacks %q:\n%s", want, gomod)
	}
	return filepath.Join(module, "bin", "fleet-controller")
}

// fencedBlock returns the body of the code block of the given language that
// follows marker in the page.
func fencedBlock(t *testing.T, text, marker, lang string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, marker+"\n```"+lang+"\n")
	if !ok {
		t.Fatalf("%s: no ```%s block after %s", page, lang, marker)
	}
	body, _, ok := strings.Cut(after, "\n```\n")
	if !ok {
		t.Fatalf("%s: the block after %s does not end", page, marker)
	}
	return body + "\n"
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// registerMember makes member 1 a member of the fleet in the hub namespace ns,
// as the page's kubeconfig-secret command does, allowed to read ConfigMaps.
func registerMember(t *testing.T, host client.Client, ns, name string) {
	t.Helper()
	ctx := t.Context()
	if err := host.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	_, err := onboard.Cluster(ctx, fleet.Config(1), host, onboard.Options{
		ClusterName: name,
		Namespace:   ns,
		Rules:       []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// writeKubeconfig writes a kubeconfig for cfg and returns its path.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	data, err := fleettest.KubeconfigFor(cfg, "hub")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// controller is a running fleet-controller process and what it logged.
type controller struct {
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{}
	err  error
}

func (c *controller) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *controller) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// has reports whether one line of the log holds every part.
func (c *controller) has(parts ...string) bool {
	for line := range strings.SplitSeq(c.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// line returns the first line of the log holding every part, with JSON's
// escaped quotes unescaped, or "".
func (c *controller) line(parts ...string) string {
	for line := range strings.SplitSeq(c.String(), "\n") {
		line = strings.ReplaceAll(line, `\"`, `"`)
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return line
		}
	}
	return ""
}

// last returns the last line of the log holding every part, or "".
func (c *controller) last(parts ...string) string {
	found := ""
	for line := range strings.SplitSeq(c.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			found = line
		}
	}
	return found
}

// exited reports whether the process ended, and how.
func (c *controller) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// startController runs the binary with the kubeconfig until stop is called
// or the test ends: SIGTERM, as the kubelet stops a pod.
func startController(t *testing.T, bin, kubeconfigPath string, args ...string) *controller {
	t.Helper()
	c := &controller{done: make(chan struct{})}
	cmd := exec.Command(bin, append([]string{"-kubeconfig", kubeconfigPath}, args...)...)
	cmd.Stdout, cmd.Stderr = c, c
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { c.stop(t, cmd) })
	return c
}

func (c *controller) stop(t *testing.T, cmd *exec.Cmd) {
	if done, _ := c.exited(); done {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-c.done
		t.Errorf("fleet-controller did not stop within 30 s of SIGTERM")
	}
	var exit *exec.ExitError
	if c.err != nil && !errors.As(c.err, &exit) {
		t.Errorf("fleet-controller: %v", c.err)
	}
}
