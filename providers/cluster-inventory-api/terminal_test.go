package clusterinventoryapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
)

// Cluster IDs that would forge log lines or disguise one cluster as
// another, or that are not IDs KEP-2149 allows, are refused, reported on
// their profile, and never engaged.
func TestHostileClusterIDsAreRefused(t *testing.T) {
	e := start(t, clusterinventoryapi.Options{
		AccessProviders: []clusterinventoryapi.AccessProvider{pluginProvider(t, "sa-token", "-service-account="+saName)},
		ClusterName:     clusterinventoryapi.ClusterID,
	})
	hostile := map[string]string{
		"newline":    "eu-1\ncluster=us-1 msg=forged",
		"esc":        "eu-1\x1b[2J",
		"rtl":        "eu-\u202e1",
		"zero-width": "eu\u200b-1",
		"nul":        "eu-1\x00",
		"tab":        "eu\t1",
		"bom":        "\ufeffeu-1",
		"too-long":   strings.Repeat("a", 600),
		"empty":      "",
		"separator":  "eu-1\u2028cluster=us-1",
		// Not UTF-8: the API server stores U+FFFD for the byte, so that
		// "eu-\xfe1" would be the same cluster.
		"not-utf8":  "eu-\xff1",
		"traversal": "a/b/../c",
		"spaces":    "eu 1 (prod)",
	}
	for name, id := range hostile {
		e.create(t, profile{name: name, member: 1, healthy: true, providers: []string{"sa-token"},
			properties: map[string]string{v1alpha1.PropertyClusterID: id}})
	}
	e.create(t, profile{name: "good", member: 2, healthy: true, providers: []string{"sa-token"},
		properties: map[string]string{v1alpha1.PropertyClusterID: "eu-2"}})
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"eu-2": 2})

	ctx := context.Background()
	var events eventsv1.EventList
	fleettest.Eventually(t, time.Minute, func() error {
		if err := e.hub.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		for name := range hostile {
			if !hasWarning(events.Items, name, clusterinventoryapi.ReasonInvalidProfile) {
				return fmt.Errorf("no %s Warning Event on %s", clusterinventoryapi.ReasonInvalidProfile, name)
			}
		}
		return nil
	})
	if got := e.tracker.Engaged(); len(got) != 1 {
		t.Errorf("engaged %d clusters, want only eu-2: %q", len(got), keys(got))
	}
	if logs := e.logs.String(); strings.ContainsAny(logs, "\x1b\u202e\u2028") || strings.Contains(logs, "\ncluster=us-1") {
		t.Error("a hostile ID reached the logs unescaped")
	}
}

func keys[V any](m map[multicluster.ClusterName]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// brokenRun is what n profiles that only a change can fix cost.
type brokenRun struct {
	logLines, events  int           // while the broken profiles are reconciled and after
	cpu               time.Duration // of this process, user and system
	goodAlone, goodBy time.Duration // to engage a good profile, alone and beside them
}

// runBrokenProfiles creates n ready profiles offering only an access
// provider the controller does not have, and a good profile before and
// after them, and counts what the broken ones cost until the controller is
// quiet: the log lines of level 0 (errors included) and the Events.
func runBrokenProfiles(t testing.TB, n int) brokenRun {
	var r brokenRun
	e := start(t, clusterinventoryapi.Options{AccessProviders: []clusterinventoryapi.AccessProvider{
		pluginProvider(t, "sa-token", "-service-account="+saName),
	}})
	// A first profile warms the manager up; the second is timed alone.
	e.create(t, profile{name: "warm-up", member: 1, healthy: true, providers: []string{"sa-token"}})
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{e.ns + "/warm-up": 1})
	begin := time.Now()
	e.create(t, profile{name: "alone", member: 1, healthy: true, providers: []string{"sa-token"}})
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{e.ns + "/warm-up": 1, e.ns + "/alone": 1})
	r.goodAlone = time.Since(begin)

	cpu0 := cpuTime()
	base := countLines(e.logs.String())
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				e.create(t, profile{name: fmt.Sprintf("broken-%05d", i), member: 2, healthy: true, providers: []string{"gcp"}})
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	begin = time.Now()
	e.create(t, profile{name: "beside", member: 2, healthy: true, providers: []string{"sa-token"}})
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{e.ns + "/warm-up": 1, e.ns + "/alone": 1, e.ns + "/beside": 2})
	r.goodBy = time.Since(begin)

	// Every broken profile was reported; then the controller goes quiet:
	// no line is logged over three seconds (a retry loop's backoff stays
	// under a second for its first ten retries).
	ctx := context.Background()
	fleettest.Eventually(t, 10*time.Minute, func() error {
		var events eventsv1.EventList
		if err := e.hub.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		r.events = 0
		for _, ev := range events.Items {
			if strings.HasPrefix(ev.Regarding.Name, "broken-") {
				r.events++
			}
		}
		if r.events < n {
			return fmt.Errorf("%d of %d broken profiles reported", r.events, n)
		}
		return nil
	})
	last := -1
	fleettest.Eventually(t, 10*time.Minute, func() error {
		lines := countLines(e.logs.String())
		if lines != last {
			last = lines
			// The quiet window: counting the log every few milliseconds
			// instead would add to the CPU this benchmark measures.
			time.Sleep(3 * time.Second)
			return fmt.Errorf("still logging: %d lines", lines-base)
		}
		return nil
	})
	r.logLines = last - base
	r.cpu = cpuTime() - cpu0
	return r
}

// countLines counts the lines of level 0 and the error lines.
func countLines(logs string) int {
	n := 0
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `"level"=0`) || !strings.Contains(line, `"level"=`) {
			n++
		}
	}
	return n
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Errors only a change of the profile can fix are reported once and not
// retried: at most two log lines and one Event per profile.
func TestBrokenProfilesAreReportedOnce(t *testing.T) {
	const n = 100
	r := runBrokenProfiles(t, n)
	t.Logf("%d broken profiles: %d log lines, %d Events", n, r.logLines, r.events)
	if r.logLines > 2*n {
		t.Errorf("%d log lines for %d broken profiles, want at most %d", r.logLines, n, 2*n)
	}
	if r.events > n {
		t.Errorf("%d Events for %d broken profiles, want at most %d", r.events, n, n)
	}
}

// BenchmarkBrokenProfiles prints what 10,000 profiles naming an access
// provider the controller does not have cost, and how fast a good profile
// beside them engages compared with alone. It runs once whatever b.N.
func BenchmarkBrokenProfiles(b *testing.B) {
	const n = 10000
	// One run, whatever b.N: it creates 10,000 objects and takes longer
	// than the benchmark time, so the framework asks for no second.
	r := runBrokenProfiles(b, n)
	b.ReportMetric(float64(r.logLines)/n, "loglines/profile")
	b.ReportMetric(float64(r.events)/n, "events/profile")
	b.ReportMetric(r.cpu.Seconds(), "cpu-s")
	b.ReportMetric(float64(r.goodAlone.Milliseconds()), "ms-good-alone")
	b.ReportMetric(float64(r.goodBy.Milliseconds()), "ms-good-beside")
	b.Logf("%d broken profiles: %d log lines, %d Events, CPU %v; a good profile engaged in %v alone, %v beside them",
		n, r.logLines, r.events, r.cpu.Round(time.Millisecond), r.goodAlone.Round(time.Millisecond), r.goodBy.Round(time.Millisecond))
}

// ClusterID holds an ID to KEP-2149's syntax: an RFC 1123 DNS subdomain of
// at most 128 characters.
func TestClusterIDSyntax(t *testing.T) {
	withID := func(id string) *v1alpha1.ClusterProfile {
		p := &v1alpha1.ClusterProfile{}
		p.Namespace, p.Name = "inventory", "p"
		p.Status.Properties = []v1alpha1.Property{{Name: v1alpha1.PropertyClusterID, Value: id}}
		return p
	}
	for _, id := range []string{"eu-1", "eu-1.prod.example", "0", strings.Repeat("a", 128)} {
		if got, err := clusterinventoryapi.ClusterID(withID(id)); err != nil || got != id {
			t.Errorf("ClusterID(%.20q) = %q, %v; want the ID", id, got, err)
		}
	}
	for _, id := range []string{"eu-\ufffd1", "a/b/../c", "eu 1", "EU-1", "-eu", "eu-", "eu..1", strings.Repeat("a", 129), "eu_1"} {
		if got, err := clusterinventoryapi.ClusterID(withID(id)); err == nil {
			t.Errorf("ClusterID(%.20q) = %q; want an error", id, got)
		} else if !errors.Is(err, clusters.ErrInvalidClusterName) {
			t.Errorf("ClusterID(%.20q): %v; want an error matching clusters.ErrInvalidClusterName", id, err)
		}
	}
}
