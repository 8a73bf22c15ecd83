package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
)

// A member whose watches stop delivering while it answers /readyz (the
// fault of a proxy, a load balancer or a stuck stream) is found by the
// probes, disconnected and engaged again with new watches: what changed in
// it meanwhile is reconciled. A healthy member beside it is untouched.
func TestASilentWatchIsFoundAndItsClusterEngagedAgain(t *testing.T) {
	const silenced, healthy = 1, 2
	provider := fleettest.NewProvider(members, fleettest.ProviderOptions{Prefix: "silent-", Members: []int{silenced, healthy}, Faulty: true})
	var logs fleettest.LogBuffer
	mgr, err := mcmanager.New(members.Config(0), provider, mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logs.Logger(),
	}, mcmanager.WithHealthChecks(mcmanager.HealthOptions{
		Interval:         200 * time.Millisecond,
		Timeout:          time.Second,
		FailureThreshold: 3,
		// A test's bound: the members' heartbeat (below) writes four times
		// a second, so a healthy member's watches never keep silent for it.
		WatchSilence: 1500 * time.Millisecond,
	}), mcmanager.WithClusterStartTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rec := &fleettest.Recorder{Namespace: "default"}
	if err := mcbuilder.ControllerManagedBy(mgr).Named("silence").For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	name := func(i int) string { return string(provider.ClusterName(i)) }
	direct := map[int]client.Client{}
	for _, i := range []int{silenced, healthy} {
		c, err := client.New(members.Config(i), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		direct[i] = c
	}
	prefix := fmt.Sprintf("silence-%d-", time.Now().UnixNano())
	create := func(i int, suffix string) string {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: prefix + suffix}}
		if err := direct[i].Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = direct[i].Delete(context.Background(), cm) })
		return cm.Name
	}

	// A heartbeat keeps the watches of both members busy, written beside the
	// faults: what a member that changes often looks like.
	for _, i := range []int{silenced, healthy} {
		create(i, "heartbeat")
	}
	beat, stopBeat := context.WithCancel(context.Background())
	var beats sync.WaitGroup
	t.Cleanup(func() { stopBeat(); beats.Wait() })
	for _, i := range []int{silenced, healthy} {
		beats.Go(func() {
			for n := 0; beat.Err() == nil; n++ {
				patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"data":{"n":"%d"}}`, n))
				err := direct[i].Patch(beat, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: prefix + "heartbeat"}}, patch)
				if err != nil && beat.Err() == nil && !apierrors.IsNotFound(err) {
					t.Errorf("heartbeat of member %d: %v", i, err)
					return
				}
				select {
				case <-beat.Done():
				case <-time.After(250 * time.Millisecond): // the heartbeat's pace
				}
			}
		})
	}
	before := map[int]string{silenced: create(silenced, "before"), healthy: create(healthy, "before")}
	for i, obj := range before {
		rec.WaitFor(t, 1, name(i), "default", obj)
	}
	// Healthy and heard from: neither member's watches were found silent.
	fleettest.Consistently(t, 3*time.Second, func() error {
		for _, i := range []int{silenced, healthy} {
			if n, _ := fleettest.Metric(t, "multicluster_cluster_watch_silences_total", map[string]string{"cluster": name(i)}); n != 0 {
				return fmt.Errorf("%s found silent %v times while its watches deliver", name(i), n)
			}
		}
		return nil
	})

	faults := members.Faults(silenced)
	t.Cleanup(faults.Restore)
	silencedAt := time.Now()
	faults.SilenceWatches()
	during := map[int]string{silenced: create(silenced, "during"), healthy: create(healthy, "during")}

	// Found: the probes fail with the silence, and the member is disconnected.
	fleettest.Eventually(t, 30*time.Second, func() error {
		if n, _ := fleettest.Metric(t, "multicluster_cluster_watch_silences_total", map[string]string{"cluster": name(silenced)}); n < 1 {
			return fmt.Errorf("%s not found silent yet", name(silenced))
		}
		return nil
	})
	found := time.Since(silencedAt)
	if secs, _ := fleettest.Metric(t, "multicluster_cluster_watch_silent_seconds", map[string]string{"cluster": name(silenced)}); secs < 1.5 {
		t.Errorf("multicluster_cluster_watch_silent_seconds of %s = %v, want beyond the bound (1.5)", name(silenced), secs)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		if v, _ := fleettest.Metric(t, "multicluster_cluster_engaged", map[string]string{"cluster": name(silenced)}); v != 0 {
			return fmt.Errorf("%s still engaged", name(silenced))
		}
		return nil
	})
	disconnected := time.Since(silencedAt)
	// Beside it, the healthy member reconciles what changed in it.
	rec.WaitFor(t, 1, name(healthy), "default", during[healthy])
	if n := rec.Count(name(silenced), "default", during[silenced]); n != 0 {
		t.Fatalf("%s reconciled %s through a silenced watch", name(silenced), during[silenced])
	}

	// Restored, the member is engaged again with new watches (those it had
	// stay silent: only a new engagement hears of the member again), and
	// what changed during the silence is reconciled.
	faults.Restore()
	rec.WaitFor(t, 1, name(silenced), "default", during[silenced])
	reconciled := time.Since(silencedAt)
	t.Logf("silenced %s: found silent after %s, disconnected after %s, its change reconciled after %s",
		name(silenced), found.Round(100*time.Millisecond), disconnected.Round(100*time.Millisecond), reconciled.Round(100*time.Millisecond))
	fleettest.Eventually(t, 30*time.Second, func() error {
		if v, _ := fleettest.Metric(t, "multicluster_cluster_watch_silent_seconds", map[string]string{"cluster": name(silenced)}); v != 0 {
			return fmt.Errorf("multicluster_cluster_watch_silent_seconds of %s = %v after it was engaged again, want 0", name(silenced), v)
		}
		return nil
	})
	for _, line := range []string{"Every watch of the cluster is silent while its API server answers", "every watch silent for"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("nothing logged with %q", line)
		}
	}

	// The healthy member was never found silent, nor disconnected.
	if n, _ := fleettest.Metric(t, "multicluster_cluster_watch_silences_total", map[string]string{"cluster": name(healthy)}); n != 0 {
		t.Errorf("%s found silent %v times", name(healthy), n)
	}
	if v, _ := fleettest.Metric(t, "multicluster_cluster_disconnected_seconds_total", map[string]string{"cluster": name(healthy)}); v != 0 {
		t.Errorf("%s was disconnected for %vs", name(healthy), v)
	}
	if v, _ := fleettest.Metric(t, "multicluster_cluster_engaged", map[string]string{"cluster": name(healthy)}); v != 1 {
		t.Errorf("%s is not engaged", name(healthy))
	}
}

// The error of a silent probe says what was found, for the disconnection's
// reason and the provider's Event.
func TestWatchSilentErrorSaysWhatWasFound(t *testing.T) {
	var err error = &fleet.WatchSilentError{Cluster: "c", Silent: 200 * time.Second, Bound: 3 * time.Minute}
	var silent *fleet.WatchSilentError
	if !errors.As(fmt.Errorf("unhealthy: %w", err), &silent) || silent.Cluster != "c" {
		t.Fatal("a wrapped WatchSilentError is not found")
	}
	want := `cluster "c": every watch silent for 3m20s (no event, no bookmark; bound 3m0s) while /readyz answers`
	if got := err.Error(); got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
