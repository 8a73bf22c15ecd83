package file_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcruntime/multicluster-runtime/internal/testfleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// fleet is shared by every test: tests only read from its members.
var fleet *testfleet.Fleet

func TestMain(m *testing.M) {
	testfleet.RunMainWithOptions(m, 3, testfleet.Options{}, func(f *testfleet.Fleet) error {
		fleet = f
		return f.MarkMembers()
	})
}

// tracker is a multicluster.Aware that records what the provider engages.
type tracker struct {
	mu      sync.Mutex
	engaged map[multicluster.ClusterName]cluster.Cluster
	ctxs    map[cluster.Cluster]context.Context // every engagement ever made
	count   map[multicluster.ClusterName]int    // engagements by name
}

func newTracker() *tracker {
	return &tracker{engaged: map[multicluster.ClusterName]cluster.Cluster{}, ctxs: map[cluster.Cluster]context.Context{}, count: map[multicluster.ClusterName]int{}}
}

func (t *tracker) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.engaged[name] = cl
	t.ctxs[cl] = ctx
	t.count[name]++
	context.AfterFunc(ctx, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.engaged[name] == cl {
			delete(t.engaged, name)
		}
	})
	return nil
}

func (t *tracker) snapshot() map[multicluster.ClusterName]cluster.Cluster {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[multicluster.ClusterName]cluster.Cluster, len(t.engaged))
	for k, v := range t.engaged {
		out[k] = v
	}
	return out
}

// eventually polls cond until it holds or the timeout expires.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %v", what, err)
}

// member tells which fleet member cl talks to, from the identity ConfigMap.
func member(ctx context.Context, cl cluster.Cluster) (int, error) {
	cm := &corev1.ConfigMap{}
	if err := cl.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: "default", Name: "identity"}, cm); err != nil {
		return -1, err
	}
	return strconv.Atoi(cm.Data["member"])
}

// expectFleet waits until exactly the clusters in want are engaged, each
// talking to the given member.
func expectFleet(t *testing.T, tr *tracker, want map[multicluster.ClusterName]int) map[multicluster.ClusterName]cluster.Cluster {
	t.Helper()
	var got map[multicluster.ClusterName]cluster.Cluster
	eventually(t, fmt.Sprintf("engaged clusters %v", want), func() error {
		got = tr.snapshot()
		if len(got) != len(want) {
			return fmt.Errorf("engaged %v", keys(got))
		}
		for name, m := range want {
			cl, ok := got[name]
			if !ok {
				return fmt.Errorf("%q not engaged; engaged: %v", name, keys(got))
			}
			if n, err := member(context.Background(), cl); err != nil || n != m {
				return fmt.Errorf("%q reaches member %d (err %v), want %d", name, n, err, m)
			}
		}
		return nil
	})
	return got
}

// waitDisengaged waits until the engagement of cl has ended.
func (t *tracker) waitDisengaged(tb *testing.T, cl cluster.Cluster) {
	tb.Helper()
	t.mu.Lock()
	ctx := t.ctxs[cl]
	t.mu.Unlock()
	if ctx == nil {
		tb.Fatal("cluster was never engaged")
	}
	eventually(tb, "the old instance to be disengaged", func() error {
		if ctx.Err() == nil {
			return fmt.Errorf("still engaged")
		}
		return nil
	})
}

// engagements returns how often name was engaged.
func (t *tracker) engagements(name multicluster.ClusterName) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count[name]
}

func keys[V any](m map[multicluster.ClusterName]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// logBuffer collects log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		fmt.Fprintln(&b.buf, prefix, args)
	}, funcr.Options{})
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// run starts p with a tracker until the test ends.
func run(t *testing.T, p *file.Provider, log logr.Logger) *tracker {
	t.Helper()
	tr := newTracker()
	ctx, cancel := context.WithCancel(logf.IntoContext(context.Background(), log))
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx, tr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("provider returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("provider did not stop")
		}
		eventually(t, "every cluster disengaged", func() error {
			if got := tr.snapshot(); len(got) > 0 {
				return fmt.Errorf("still engaged: %v", keys(got))
			}
			return nil
		})
	})
	return tr
}

// kubeconfig returns a kubeconfig with one context per entry, named after
// the entry and pointing at the given member.
func kubeconfig(t *testing.T, contexts map[string]int) []byte {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for name, m := range contexts {
		data, err := fleet.Kubeconfig(m, name)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := clientcmd.Load(data)
		if err != nil {
			t.Fatal(err)
		}
		merged.Clusters[name] = kc.Clusters[name]
		merged.AuthInfos[name] = kc.AuthInfos[name]
		merged.Contexts[name] = kc.Contexts[name]
		merged.CurrentContext = name
	}
	out, err := clientcmd.Write(*merged)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeAtomically writes data to path the way editors and tools do: into a
// hidden temporary file, then renamed into place.
func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
