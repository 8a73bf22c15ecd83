package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// scriptedReadyz answers the cluster's /readyz from a script the test
// writes (true: healthy), and sends every other request to the real API
// server. Once the script runs out, /readyz is healthy.
type scriptedReadyz struct {
	next http.RoundTripper

	mu     sync.Mutex
	script []bool
	asked  int
}

func (s *scriptedReadyz) play(answers ...bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script[:0], answers...)
}

func (s *scriptedReadyz) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path != "/readyz" {
		return s.next.RoundTrip(req)
	}
	s.mu.Lock()
	healthy := true
	if len(s.script) > 0 {
		healthy, s.script = s.script[0], s.script[1:]
	}
	s.asked++
	s.mu.Unlock()
	if healthy {
		return s.next.RoundTrip(req)
	}
	return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Body: http.NoBody, Request: req}, nil
}

func (s *scriptedReadyz) left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// A member that answers once between failures (flapping) is not engaged
// again at each healthy answer when SuccessThreshold asks for two in a row;
// with a threshold of one it is, relisting every watched type each time,
// until it has been disconnected FlapThreshold times and is damped as
// flapping. Both run the same script against a real API server.
func TestSuccessThresholdDampsAFlappingMember(t *testing.T) {
	flap := make([]bool, 0, 40)
	for range 20 {
		flap = append(flap, false, true)
	}
	engagements := map[int]int{}
	for _, threshold := range []int{1, 2} {
		t.Run(fmt.Sprintf("threshold=%d", threshold), func(t *testing.T) {
			script := &scriptedReadyz{}
			cfg := members.Config(1)
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { script.next = rt; return script })
			cl, err := cluster.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			tr := fleettest.NewTracker()
			e := serveEngine(t, fleet.Options{
				Health:     fleet.HealthOptions{Interval: 50 * time.Millisecond, Timeout: time.Second, FailureThreshold: 1, SuccessThreshold: threshold},
				MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
			}, tr)
			name := multicluster.ClusterName(fmt.Sprintf("flapping-%d", threshold))
			e.SetMember(fleet.Member{Name: name, Hash: "1", Cluster: cl})
			fleettest.Eventually(t, 30*time.Second, func() error {
				if s, _ := e.State(name); s != fleet.StateEngaged {
					return fmt.Errorf("%s is %s", name, s)
				}
				return nil
			})
			before := tr.Count(name)
			script.play(flap...)
			fleettest.Eventually(t, 30*time.Second, func() error {
				if n := script.left(); n > 0 {
					return fmt.Errorf("%d answers of the script left", n)
				}
				return nil
			})
			// The script is over: the member answers, and is engaged again.
			fleettest.Eventually(t, 30*time.Second, func() error {
				if s, _ := e.State(name); s != fleet.StateEngaged {
					return fmt.Errorf("%s is %s after the flapping ended", name, s)
				}
				return nil
			})
			engagements[threshold] = tr.Count(name) - before
			t.Logf("threshold %d: %d engagements for 20 healthy answers between failures, and the recovery", threshold, engagements[threshold])
		})
	}
	if engagements[2] != 1 {
		t.Errorf("with two healthy answers in a row needed, the flapping member was engaged %d times, want once (after the flapping)", engagements[2])
	}
	// With one answer needed, each healthy answer engages it again until it
	// has been disconnected FlapThreshold times: then it is flapping, and
	// needs more answers in a row than the script gives it.
	if engagements[1] < fleet.FlapThreshold || engagements[1] > fleet.FlapThreshold+1 {
		t.Errorf("with one healthy answer needed, the flapping member was engaged %d times, want %d (until found flapping) or %d (and the recovery)", engagements[1], fleet.FlapThreshold, fleet.FlapThreshold+1)
	}
}

// A health check of the user's own disconnects a cluster whose API server
// answers /readyz, with the check's error, redacted, as the reason; the
// cluster comes back once the check passes. Its series show the probes, the
// state and the time spent disconnected, and leave with the cluster.
func TestHealthCheckAndAvailabilitySeries(t *testing.T) {
	var mu sync.Mutex
	var failing error
	check := func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
		// A real request: the check reads the cluster as a user's would.
		if _, err := cl.GetRESTMapper().RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		return failing
	}
	cl, err := cluster.New(members.Config(2))
	if err != nil {
		t.Fatal(err)
	}
	tr := fleettest.NewTracker()
	e := serveEngine(t, fleet.Options{
		Health:     fleet.HealthOptions{Interval: 50 * time.Millisecond, Timeout: time.Second, FailureThreshold: 2, SuccessThreshold: 1, Check: check},
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
	}, tr)
	const name = "checked"
	e.SetMember(fleet.Member{Name: name, Hash: "1", Cluster: cl})
	state := func(want fleet.State) func() error {
		return func() error {
			if s, _ := e.State(name); s != want {
				return fmt.Errorf("%s is %s, want %s", name, s, want)
			}
			return nil
		}
	}
	fleettest.Eventually(t, 30*time.Second, state(fleet.StateEngaged))
	fleettest.Eventually(t, 10*time.Second, func() error {
		if n := testutil.ToFloat64(metrics.Probes.WithLabelValues(name, "ok")); n < 2 {
			return fmt.Errorf("%v healthy probes counted", n)
		}
		return nil
	})
	if v := testutil.ToFloat64(metrics.Engaged.WithLabelValues(name)); v != 1 {
		t.Errorf("multicluster_cluster_engaged{cluster=%q} = %v while engaged, want 1", name, v)
	}

	mu.Lock()
	failing = errors.New(`deployment "web" is not available: see https://admin:hunter2@example.com/status`)
	mu.Unlock()
	fleettest.Eventually(t, 30*time.Second, state(fleet.StateDisconnected))
	if v := testutil.ToFloat64(metrics.Engaged.WithLabelValues(name)); v != 0 {
		t.Errorf("multicluster_cluster_engaged{cluster=%q} = %v while disconnected, want 0", name, v)
	}
	if n := testutil.ToFloat64(metrics.Probes.WithLabelValues(name, "failed")); n < 2 {
		t.Errorf("%v failed probes counted, want at least the threshold, 2", n)
	}
	time.Sleep(100 * time.Millisecond) // disconnected for a while: the time is counted below

	mu.Lock()
	failing = nil
	mu.Unlock()
	fleettest.Eventually(t, 30*time.Second, state(fleet.StateEngaged))
	if s := testutil.ToFloat64(metrics.DisconnectedSeconds.WithLabelValues(name)); s < 0.1 {
		t.Errorf("multicluster_cluster_disconnected_seconds_total{cluster=%q} = %v, want at least the 0.1 s it was down", name, s)
	}
	if at := testutil.ToFloat64(metrics.LastTransition.WithLabelValues(name)); time.Since(time.Unix(int64(at), 0)) > time.Minute {
		t.Errorf("last transition at %v, want within the last minute", at)
	}

	e.RemoveMember(name)
	fleettest.Eventually(t, 30*time.Second, func() error {
		for _, m := range []string{"multicluster_cluster_engaged", "multicluster_cluster_probes_total", "multicluster_cluster_disconnected_seconds_total"} {
			if _, n := fleettest.Metric(t, m, map[string]string{"cluster": name}); n > 0 {
				return fmt.Errorf("%d series of %s left for the removed cluster", n, m)
			}
		}
		return nil
	})
}

// The reason a cluster was disconnected for is its health check's error,
// redacted: it reaches logs and the cluster's state.
func TestHealthCheckErrorIsRedacted(t *testing.T) {
	var logged strings.Builder
	var mu sync.Mutex
	check := func(context.Context, multicluster.ClusterName, cluster.Cluster) error {
		return errors.New("GET https://admin:hunter2@example.com/healthz: refused")
	}
	cl, err := cluster.New(members.Config(3))
	if err != nil {
		t.Fatal(err)
	}
	e := serveEngine(t, fleet.Options{
		Logger:     funcr.New(func(prefix, args string) { mu.Lock(); logged.WriteString(prefix + " " + args + "\n"); mu.Unlock() }, funcr.Options{}),
		Health:     fleet.HealthOptions{Interval: 50 * time.Millisecond, Timeout: time.Second, FailureThreshold: 1, Check: check, SkipReadyz: true},
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
	}, fleettest.NewTracker())
	e.SetMember(fleet.Member{Name: "redacted", Hash: "1", Cluster: cl})
	fleettest.Eventually(t, 30*time.Second, func() error {
		if s, _ := e.State("redacted"); s != fleet.StateDisconnected {
			return fmt.Errorf("redacted is %s", s)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "health check: GET") {
		t.Errorf("the check's error is not the reason logged:\n%s", logged.String())
	}
	if strings.Contains(logged.String(), "hunter2") {
		t.Errorf("the check's error was logged with its credentials:\n%s", logged.String())
	}
}
