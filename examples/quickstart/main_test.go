package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	silenceLibraryLogs() // as main does
	rerunInProcess = true
	goleak.VerifyTestMain(m)
}

// syncBuffer is an io.Writer safe to read while the demo writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var (
	eventLine   = regexp.MustCompile(`^\s*\d+\.\ds  (fleet|engage|disengage|reconcile)\s+(\S+)`)
	summaryLine = regexp.MustCompile(`^summary: (\d+) clusters engaged, (\d+) disengaged, (\d+) reconciles \((.*)\); fleet now: (.*)$`)
)

func TestDemoEngagesDisengagesAndReconciles(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out syncBuffer
	if err := run(context.Background(), []string{"-demo"}, &out); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Log("\n" + text)

	lines := strings.Split(strings.TrimSpace(text), "\n")
	var engaged, disengaged []string
	for _, line := range lines[1 : len(lines)-1] {
		m := eventLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("unexpected output line (library logging?): %q", line)
			continue
		}
		switch m[1] {
		case "engage":
			engaged = append(engaged, m[2])
		case "disengage":
			disengaged = append(disengaged, m[2])
		}
	}
	if len(engaged) != 4 || !containsAll(engaged, "cluster-1", "cluster-2", "cluster-3", "cluster-4") {
		t.Errorf("engage lines: %v, want cluster-1 to cluster-4 once each", engaged)
	}
	if len(disengaged) != 1 || disengaged[0] != "cluster-2" {
		t.Errorf("disengage lines: %v, want cluster-2 only", disengaged)
	}

	m := summaryLine.FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("the last line is not the summary: %q", lines[len(lines)-1])
	}
	if m[1] != "4" || m[2] != "1" || m[5] != "cluster-1, cluster-3, cluster-4" {
		t.Errorf("summary: %q; want 4 engaged, 1 disengaged, fleet cluster-1, cluster-3, cluster-4", m[0])
	}
	perCluster := map[string]int{}
	for _, part := range strings.Split(m[4], ", ") {
		name, n, _ := strings.Cut(part, ": ")
		perCluster[name], _ = strconv.Atoi(n)
	}
	for _, name := range []string{"cluster-1", "cluster-2", "cluster-3", "cluster-4"} {
		if perCluster[name] < 1 {
			t.Errorf("no reconcile counted for %s: %q", name, m[4])
		}
	}
	if !strings.Contains(text, "reconcile  cluster-1  default/welcome  (keys: farewell, greeting)") {
		t.Error("the update of cluster-1's ConfigMap was not reconciled")
	}
	expectNothingLeft(t, tmp)
}

func TestDemoStopsCleanlyWhenInterrupted(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-demo"}, &out) }()

	deadline := time.After(2 * time.Minute)
	for !strings.Contains(out.String(), "engage     cluster-") {
		select {
		case err := <-done:
			t.Fatalf("demo ended before any cluster engaged: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("no cluster engaged:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel() // what Ctrl-C does
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("an interrupted demo should exit cleanly, got %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the demo did not stop after the interrupt")
	}
	text := out.String()
	if !strings.Contains(text, "\ninterrupted\nsummary: ") {
		t.Errorf("no interruption notice and summary:\n%s", text)
	}
	if strings.Contains(text, "disengage  cluster-1") {
		t.Errorf("shutting down was reported as clusters leaving:\n%s", text)
	}
	expectNothingLeft(t, tmp)
}

func TestClusterNames(t *testing.T) {
	for _, c := range []struct{ path, context, want string }{
		{"/fleet/cluster-1.kubeconfig", "cluster-1", "cluster-1"},
		{"/fleet/prod.yaml", "eu-west", "prod+eu-west"},
		{"/home/me/.kube/config", "dev", "config+dev"},
	} {
		if got := clusterName(c.path, c.context); got != c.want {
			t.Errorf("clusterName(%q, %q) = %q, want %q", c.path, c.context, got, c.want)
		}
	}
}

// expectNothingLeft checks that the demo removed its files (and the control
// planes' data directories) and that no child process survives.
func expectNothingLeft(t *testing.T, tmp string) {
	t.Helper()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
	children, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range children {
		if data, err := os.ReadFile(f); err == nil && len(bytes.TrimSpace(data)) > 0 {
			t.Errorf("child processes still running: %s", data)
		}
	}
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, l := range list {
			found = found || l == w
		}
		if !found {
			return false
		}
	}
	return true
}
