package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// mortal is a cluster whose death the test decides: closing die ends its
// Start although the engine still runs it, and Start returns only once hold
// is closed (a cluster slow to shut down).
type mortal struct {
	cluster.Cluster
	die, hold chan struct{}
	inner     chan struct{} // closed when the cluster itself has stopped

	mu       sync.Mutex
	returned time.Time // when Start returned
}

func newMortal(t *testing.T, cl cluster.Cluster) *mortal {
	t.Helper()
	m := &mortal{Cluster: cl, die: make(chan struct{}), hold: make(chan struct{}), inner: make(chan struct{})}
	t.Cleanup(func() { m.kill(); m.release() })
	return m
}

func (m *mortal) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-m.die:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := m.Cluster.Start(ctx)
	close(m.inner)
	<-m.hold
	m.mu.Lock()
	m.returned = time.Now()
	m.mu.Unlock()
	return err
}

var closeOnce sync.Map

func closeChan(c chan struct{}) {
	if _, loaded := closeOnce.LoadOrStore(c, true); !loaded {
		close(c)
	}
}

func (m *mortal) kill()    { closeChan(m.die) }
func (m *mortal) release() { closeChan(m.hold) }

func (m *mortal) returnedAt() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.returned
}

// logLines records the messages an engine logs, with their cluster.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, args)
		l.mu.Unlock()
	}, funcr.Options{})
}

func (l *logLines) find(msg string, name multicluster.ClusterName) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, fmt.Sprintf("%q", msg)) && strings.Contains(line, fmt.Sprintf("\"cluster\"=%q", name)) {
			return nil
		}
	}
	return fmt.Errorf("no log line %q for cluster %q", msg, name)
}

// startProbing runs an engine that probes every 50ms and disconnects after
// one failure, with a holder subscribed, until the test ends.
func startProbing(t *testing.T, opts fleet.Options) (*fleet.Engine, *holder) {
	t.Helper()
	opts.MinBackoff, opts.MaxBackoff = 50*time.Millisecond, 200*time.Millisecond
	opts.Health = fleet.HealthOptions{Interval: 50 * time.Millisecond, Timeout: time.Second, FailureThreshold: 1}
	e := fleet.New(opts)
	tr := newHolder()
	e.Subscribe(tr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, tr
}

func inState(e *fleet.Engine, name multicluster.ClusterName, want fleet.State) func() error {
	return func() error {
		if got, _ := e.State(name); got != want {
			return fmt.Errorf("%s is %s, want %s", name, got, want)
		}
		return nil
	}
}

// disconnectAndReconnect cuts the cluster's server off until the engine
// disconnects it, then lets it answer again until it is engaged again: the
// same instance, engaged anew.
func disconnectAndReconnect(t *testing.T, e *fleet.Engine, name multicluster.ClusterName, proxy *testbed.Proxy) {
	t.Helper()
	proxy.Cut()
	fleettest.Eventually(t, time.Minute, inState(e, name, fleet.StateDisconnected))
	proxy.SetUp(true)
	fleettest.Eventually(t, time.Minute, inState(e, name, fleet.StateEngaged))
}

// hasHealthySeries reports whether multicluster_cluster_healthy has a series
// for name.
func hasHealthySeries(name multicluster.ClusterName) bool {
	ch := make(chan prometheus.Metric, 64)
	go func() { metrics.Healthy.Collect(ch); close(ch) }()
	found := false
	for m := range ch {
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			continue
		}
		for _, l := range out.GetLabel() {
			if l.GetName() == "cluster" && l.GetValue() == name {
				found = true
			}
		}
	}
	return found
}

// Defect 8: a cluster handed to another replica leaves no series in
// multicluster_cluster_healthy behind: the new owner reports its health; and
// when it comes back, this replica reports it again.
func TestHealthySeriesReleasedOnHandOff(t *testing.T) {
	fences := newFenceService()
	e, tr := startProbing(t, fleet.Options{Admission: fences})
	const name = "handed-off-health"
	cfg := members.Config(1)
	e.SetMember(fleet.Member{Name: name, Hash: "1", Build: func(context.Context) (cluster.Cluster, error) { return cluster.New(cfg) }})
	fleettest.Eventually(t, time.Minute, func() error {
		if _, ok := tr.Engaged()[name]; !ok {
			return errors.New("not engaged")
		}
		if !hasHealthySeries(name) {
			return errors.New("no health series yet")
		}
		return nil
	})

	fences.setOwns(name, false)
	fleettest.Eventually(t, time.Minute, notEngaged(tr, name))
	fleettest.Eventually(t, time.Minute, func() error {
		if hasHealthySeries(name) {
			return errors.New("multicluster_cluster_healthy still has a series for a cluster handed to another replica")
		}
		return nil
	})

	// Handed back, the cluster reports its health again: a probe whose answer
	// matches the value written before the hand-off still writes it.
	fences.setOwns(name, true)
	fleettest.Eventually(t, time.Minute, func() error {
		if !hasHealthySeries(name) {
			return errors.New("no multicluster_cluster_healthy series for a cluster handed back to this replica")
		}
		return nil
	})
}

// Defect 8: a pre-built cluster the engine runs, disconnected and engaged
// again, keeps its stopped signal: its death afterwards is noticed.
func TestReconnectedInstanceDeathIsNoticed(t *testing.T) {
	var logs logLines
	e, _ := startProbing(t, fleet.Options{Logger: logs.logger()})
	const name = "reconnected-dies"
	cfg, proxy := testbed.Proxied(t, members.Config(1))
	inner, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := newMortal(t, inner)
	cl.release() // Start returns as soon as the cluster stops
	e.SetMember(fleet.Member{Name: name, Hash: "1", Cluster: cl})
	fleettest.Eventually(t, time.Minute, inState(e, name, fleet.StateEngaged))
	disconnectAndReconnect(t, e, name, proxy)

	cl.kill()
	fleettest.Eventually(t, time.Minute, func() error { return logs.find("Cluster stopped running", name) })
}

// A pre-built cluster disconnected and engaged again, then handed to
// another replica, keeps running (the engine did not build it): its fence
// is released once it is disengaged and drained; handed back, the same
// cluster is engaged again (issue 40: it used to be stopped, and then
// refused as "a pre-built cluster cannot be started again"); removed, the
// engine, which started it, stops it.
func TestHandedOffPrebuiltClusterRunsUntilRemoved(t *testing.T) {
	fences := newFenceService()
	e, tr := startProbing(t, fleet.Options{Admission: fences})
	const name = "reconnected-handed-off"
	cfg, proxy := testbed.Proxied(t, members.Config(1))
	inner, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := newMortal(t, inner)
	cl.release() // Start returns as soon as the cluster stops
	e.SetMember(fleet.Member{Name: name, Hash: "1", Cluster: cl})
	fleettest.Eventually(t, time.Minute, inState(e, name, fleet.StateEngaged))
	disconnectAndReconnect(t, e, name, proxy)

	fences.setOwns(name, false)
	fleettest.Eventually(t, time.Minute, func() error {
		if _, released := fences.releasedAt(name); !released {
			return errors.New("fence not released")
		}
		return notEngaged(tr, name)()
	})
	select {
	case <-cl.inner:
		t.Fatal("the engine stopped a pre-built cluster it did not build when it was handed away")
	default:
	}
	fences.setOwns(name, true)
	fleettest.Eventually(t, time.Minute, engagedWith(tr, name, cl))

	e.RemoveMember(name)
	fleettest.Eventually(t, time.Minute, func() error {
		if cl.returnedAt().IsZero() {
			return errors.New("the engine started the pre-built cluster: removing its member must stop it")
		}
		return nil
	})
}

// dyingSubscriber kills the first cluster it is engaged with while it engages
// it, and returns once that cluster's Start has returned.
type dyingSubscriber struct {
	victim *mortal
}

func (d *dyingSubscriber) Engage(_ context.Context, _ multicluster.ClusterName, cl cluster.Cluster) error {
	if cl == cluster.Cluster(d.victim) {
		d.victim.kill()
		<-d.victim.inner
		// The engine notices Start returned through its stopped signal, closed
		// right after Start returns: give it that moment.
		deadline := time.Now().Add(10 * time.Second)
		for d.victim.returnedAt().IsZero() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Defect 8: a cluster whose Start returns while it is being engaged is not
// made current: it is built again, and every subscriber ends up with a live
// instance.
func TestInstanceDeadWhileEngagingIsNotMadeCurrent(t *testing.T) {
	fences := newFenceService()
	e, tr := runningEngine(t, fleet.Options{Admission: fences})
	const name = "dies-while-engaging"
	cfg := members.Config(1)
	first, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	victim := newMortal(t, first)
	victim.release()
	e.Subscribe(&dyingSubscriber{victim: victim})
	var mu sync.Mutex
	builds := 0
	e.SetMember(fleet.Member{Name: name, Hash: "1", Build: func(context.Context) (cluster.Cluster, error) {
		mu.Lock()
		defer mu.Unlock()
		builds++
		if builds == 1 {
			return victim, nil
		}
		return cluster.New(cfg)
	}})
	fleettest.Eventually(t, time.Minute, func() error {
		got, ok := tr.Engaged()[name]
		switch {
		case !ok:
			return errors.New("not engaged")
		case got == cluster.Cluster(victim):
			return errors.New("engaged with the instance whose Start returned while it was engaged")
		}
		return nil
	})
	if s, _ := e.State(name); s != fleet.StateEngaged {
		t.Fatalf("%s is %s", name, s)
	}
}
