package sharding_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
)

// Environment of a replica process (the test binary re-executed).
const (
	replicaEnv    = "SHARDING_TEST_REPLICA"
	kubeconfigEnv = "SHARDING_TEST_KUBECONFIG"
	groupEnv      = "SHARDING_TEST_GROUP"
	clustersEnv   = "SHARDING_TEST_CLUSTERS"
)

var processTiming = timing(6*time.Second, 4*time.Second, 500*time.Millisecond)

// replicaMain runs one replica until SIGTERM, printing "open|close <cluster>
// <unix nanos>" for every holding interval.
func replicaMain() int {
	id := os.Getenv(replicaEnv)
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(kubeconfigEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	n, _ := strconv.Atoi(os.Getenv(clustersEnv))
	opts := processTiming
	opts.Name, opts.Identity = os.Getenv(groupEnv), id
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, id, prefix, args) }, funcr.Options{Verbosity: 1})
	opts.Logger = &log
	c, err := sharding.New(cfg, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	rec := &printer{w: os.Stdout}
	var wg sync.WaitGroup
	wg.Go(func() { runEngine(ctx, c, clusterNames(n), &rec.recorder, nil) })
	go rec.run(ctx)
	if err := c.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	wg.Wait()
	rec.flush()
	return 0
}

// printer prints the intervals a recorder sees open and close.
type printer struct {
	recorder
	w       io.Writer
	mu      sync.Mutex
	printed map[*interval]int
}

func (p *printer) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.printed == nil {
		p.printed = map[*interval]int{}
	}
	p.recorder.mu.Lock()
	defer p.recorder.mu.Unlock()
	for _, iv := range p.intervals {
		if p.printed[iv] == 0 {
			fmt.Fprintf(p.w, "open %s %d\n", iv.cluster, iv.start.UnixNano())
			p.printed[iv] = 1
		}
		if p.printed[iv] == 1 && !iv.end.IsZero() {
			fmt.Fprintf(p.w, "close %s %d\n", iv.cluster, iv.end.UnixNano())
			p.printed[iv] = 2
		}
	}
}

func (p *printer) run(ctx context.Context) {
	for ctx.Err() == nil {
		p.flush()
		time.Sleep(10 * time.Millisecond)
	}
}

// Three replica processes share 12 clusters; one is stopped with SIGTERM, one
// killed with SIGKILL. The third ends up with every cluster, and no cluster was
// ever held by two processes at a time.
func TestSeparateProcesses(t *testing.T) {
	kc, err := fleettest.KubeconfigFor(host, "host")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	names := clusterNames(12)
	rec := &recorder{}
	procs := map[string]*exec.Cmd{}
	group := fmt.Sprintf("processes-%d", time.Now().UnixNano()%1e9) // fresh for -count
	var readers sync.WaitGroup
	for _, id := range []string{"p0", "p1", "p2"} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), replicaEnv+"="+id, kubeconfigEnv+"="+path, groupEnv+"="+group, clustersEnv+"="+strconv.Itoa(len(names)))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[id] = cmd
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		readers.Go(func() { readIntervals(t, id, out, rec) })
	}
	t.Cleanup(func() { // runs before the kills: on failure, every replica prints its goroutines
		if t.Failed() {
			for _, cmd := range procs {
				_ = cmd.Process.Signal(syscall.SIGQUIT)
			}
			// A Go process exits after writing its SIGQUIT dump, which closes
			// its stdout: wait for every reader to see that (bounded) before
			// the kills below cut a dump short.
			done := make(chan struct{})
			go func() { readers.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Log("a replica did not exit within 10s of SIGQUIT; killing it")
			}
		}
	})
	rec.expectCoverage(t, names, 2*time.Minute)

	if err := procs["p0"].Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := procs["p0"].Wait(); err != nil {
		t.Fatalf("p0 did not stop cleanly: %v", err)
	}
	rec.expectCoverage(t, names, time.Minute, "p1", "p2")

	killed := time.Now()
	if err := procs["p1"].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = procs["p1"].Wait()
	rec.closeAll("p1", killed) // a dead process holds nothing
	rec.expectCoverage(t, names, time.Minute, "p2")
	t.Logf("after the kill, p2 held every cluster after %s (lease %s)", time.Since(killed), processTiming.LeaseDuration)

	if err := procs["p2"].Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := procs["p2"].Wait(); err != nil {
		t.Fatalf("p2 did not stop cleanly: %v", err)
	}
	readers.Wait()
	rec.checkNoOverlap(t)
}

// readIntervals feeds a replica's printed intervals into rec.
func readIntervals(t *testing.T, id string, r io.Reader, rec *recorder) {
	open := map[string]*interval{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || (f[0] != "open" && f[0] != "close") {
			continue // other output of the test binary
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Errorf("replica %s printed %q", id, sc.Text())
			continue
		}
		at := time.Unix(0, ns)
		if f[0] == "open" {
			open[f[1]] = rec.open(id, f[1], at)
		} else if iv := open[f[1]]; iv != nil {
			rec.close(iv, at)
			delete(open, f[1])
		}
	}
}
