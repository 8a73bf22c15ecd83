package movetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

var fleet *fleettest.Fleet

// A host and two members of the provider's.
func TestMain(m *testing.M) {
	fleettest.RunMain(m, 3, func(f *fleettest.Fleet) { fleet = f })
}

// TestAProgramMovesWithItsUpstreamProvider builds a program on this
// library's import path together with a provider module written against
// upstream's (testdata/fleetprovider: its go.mod requires
// sigs.k8s.io/multicluster-runtime and it imports nothing else of ours), with
// the one replace line docs/migration.md gives, outside the workspace as a
// user builds it; then runs it against real API servers and waits for its
// reconciler to see a ConfigMap of each of the provider's clusters.
func TestAProgramMovesWithItsUpstreamProvider(t *testing.T) {
	compatDir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	libDir := filepath.Dir(compatDir)
	work := t.TempDir()
	providerDir := filepath.Join(work, "fleetprovider")
	programDir := filepath.Join(work, "program")
	copyFile(t, "testdata/fleetprovider/provider.go", filepath.Join(providerDir, "provider.go"))
	copyFile(t, "testdata/program/main.go", filepath.Join(programDir, "main.go"))
	requires := libraryRequirements(t, libDir)
	writeFile(t, filepath.Join(providerDir, "go.mod"), "module example.com/fleetprovider\n\ngo 1.26.0\n\n"+
		"require sigs.k8s.io/multicluster-runtime v0.22.0\n\n"+requires)
	writeFile(t, filepath.Join(programDir, "go.mod"), "module example.com/program\n\ngo 1.26.0\n\n"+
		"require (\n\tgithub.com/mcruntime/multicluster-runtime v0.1.0\n\texample.com/fleetprovider v0.0.0\n)\n\n"+requires+
		"\nreplace (\n"+
		"\texample.com/fleetprovider => ../fleetprovider\n"+
		// Until v0.1.0 is on the proxy, as docs/getting-started/installation.md says.
		"\tgithub.com/mcruntime/multicluster-runtime => "+libDir+"\n"+
		// The line of docs/migration.md.
		"\tsigs.k8s.io/multicluster-runtime => "+compatDir+"\n)\n")
	sum, err := os.ReadFile(filepath.Join(libDir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(programDir, "go.sum"), string(sum))

	bin := filepath.Join(work, "program.bin")
	started := time.Now()
	if out, err := goCmd(programDir, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the program with its upstream provider: %v\n%s", err, out)
	}
	t.Logf("built in %s", time.Since(started).Round(time.Millisecond))
	out, err := goCmd(programDir, "list", "-m", "sigs.k8s.io/multicluster-runtime").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "=> "+compatDir) {
		t.Fatalf("the provider's sigs.k8s.io/multicluster-runtime is not the compatibility module: %v\n%s", err, out)
	}

	host := filepath.Join(work, "host.kubeconfig")
	if err := fleet.WriteKubeconfig(0, host, "host"); err != nil {
		t.Fatal(err)
	}
	members := []string{}
	for i, name := range []string{"east", "west"} {
		file := filepath.Join(work, name+".kubeconfig")
		if err := fleet.WriteKubeconfig(i+1, file, name); err != nil {
			t.Fatal(err)
		}
		members = append(members, name+"="+file)
	}
	lines := runProgram(t, bin, "-host", host, "-members", strings.Join(members, ","))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, name := range []string{"east", "west"} {
		c, err := client.New(fleet.Config(i+1), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "moved"},
			Data:       map[string]string{"value": "from-" + name},
		}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatalf("cluster %s: %v", name, err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), cm) })
	}
	for _, name := range []string{"east", "west"} {
		want := fmt.Sprintf("reconciled %s default/moved from-%s", name, name)
		if !lines.waitFor(ctx, want) {
			t.Fatalf("the program never reconciled the ConfigMap of the provider's cluster %s (%q); its output:\n%s", name, want, lines.all())
		}
	}
	t.Logf("the program's output:\n%s", lines.all())
}

// libraryRequirements returns the library's require blocks, so that the
// test modules need no module the library's build does not have.
func libraryRequirements(t *testing.T, libDir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(libDir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte("\nrequire"))
	if i < 0 {
		t.Fatal("the library's go.mod has no require block")
	}
	return string(data[i+1:])
}

// goCmd runs the go command as a user's build does: outside this
// repository's workspace, the module cache as the only source of modules.
func goCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
	return cmd
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(data))
}

func writeFile(t *testing.T, file, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// output collects a process's lines.
type output struct {
	mu     sync.Mutex
	lines  []string
	update chan struct{}
}

func (o *output) add(line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, line)
	close(o.update)
	o.update = make(chan struct{})
}

func (o *output) all() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.lines, "\n")
}

// waitFor reports whether a line equal to want is printed before ctx ends.
func (o *output) waitFor(ctx context.Context, want string) bool {
	for {
		o.mu.Lock()
		for _, l := range o.lines {
			if l == want {
				o.mu.Unlock()
				return true
			}
		}
		update := o.update
		o.mu.Unlock()
		select {
		case <-update:
		case <-ctx.Done():
			return false
		}
	}
}

// runProgram starts the program; it is stopped, and its output read to the
// end, when the test ends.
func runProgram(t *testing.T, bin string, args ...string) *output {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &output{update: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			o.add(s.Text())
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the program's log:\n%s", stderr.String())
		}
	})
	return o
}
