package kubeconfig_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/pausetest"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// The annotation multicluster-runtime.io/paused on a kubeconfig Secret
// pauses its cluster without rebuilding it; removing it reconciles each held
// key once.
func TestPausedAnnotationOnTheSecretPausesTheCluster(t *testing.T) {
	ctx := context.Background()
	ns := testbed.Name("paused")
	member := testbed.NewClient(t, fleet.Config(1))
	testbed.CreateNamespace(t, member, ns)
	rec := &fleettest.Recorder{Namespace: ns}
	e := startSetUp(t, nil, kubeconfig.Options{}, func(mgr mcmanager.Manager) { pausetest.Controller(t, mgr, rec) })
	secret := e.secret(t, "paused", 1)
	if err := e.host.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	pausetest.Scenario{
		Manager: e.mgr, Recorder: rec, Tracker: e.tracker, Cluster: "paused",
		Member: member, Namespace: ns, MemberConfig: fleet.Config(1),
		SetPaused: pausetest.Annotate(e.host, secret),
	}.Run(t)
}

// Under sharding every replica reads the same Secret: a pause set by
// annotation follows the cluster to its next owner, which holds its requests
// from the moment it engages it, and reconciles each once when the
// annotation goes.
func TestPausedAnnotationFollowsTheClusterAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	ns := testbed.Name("paused-sharded")
	member := testbed.NewClient(t, fleet.Config(1))
	testbed.CreateNamespace(t, member, ns)
	shards := sharding.Options{Name: testbed.Name("pause"),
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond}
	recs := map[string]*fleettest.Recorder{}
	envs := map[string]*env{}
	for _, replica := range []string{"r1", "r2"} {
		recs[replica] = &fleettest.Recorder{Namespace: ns}
		opts := kubeconfig.Options{}
		if e := envs["r1"]; e != nil {
			opts.Namespace = e.ns // the same Secrets
		}
		shards.Identity = replica
		envs[replica] = startSetUp(t, nil, opts, func(mgr mcmanager.Manager) { pausetest.Controller(t, mgr, recs[replica]) },
			mcmanager.WithSharding(shards))
	}
	const name = "handed-off"
	secret := envs["r1"].secret(t, name, 1)
	if err := envs["r1"].host.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	engine := func(replica string) *mcfleet.Engine { return envs[replica].mgr.(mcmanager.FleetOwner).Fleet() }
	testbed.CreateConfigMap(t, member, ns, "before", nil)
	var owner, next string
	fleettest.Eventually(t, time.Minute, func() error {
		for _, r := range []string{"r1", "r2"} {
			if s, _ := engine(r).State(name); s == mcfleet.StateEngaged && recs[r].Count(name, ns, "before") > 0 {
				owner = r
				return nil
			}
		}
		return fmt.Errorf("no replica has engaged %q and reconciled its ConfigMap", name)
	})
	next = map[string]string{"r1": "r2", "r2": "r1"}[owner]

	pause := pausetest.Annotate(envs["r1"].host, secret)
	pause(t, true)
	fleettest.Eventually(t, 30*time.Second, func() error {
		if s, _ := engine(owner).Snapshot(name); !s.Paused {
			return fmt.Errorf("%s: %q not paused", owner, name)
		}
		return nil
	})

	envs[owner].stop() // the cluster moves to next, still paused
	cm := &corev1.ConfigMap{}
	if err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "before"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"changed": "while handed off"}
	if err := member.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testbed.CreateConfigMap(t, member, ns, "during", nil)
	fleettest.Eventually(t, time.Minute, func() error {
		if s, _ := engine(next).State(name); s != mcfleet.StateEngaged {
			return fmt.Errorf("%s: %q is %s, want engaged", next, name, s)
		}
		if s, _ := engine(next).Snapshot(name); !s.Paused {
			return fmt.Errorf("%s engaged %q unpaused", next, name)
		}
		return nil
	})
	fleettest.Consistently(t, 2*time.Second, func() error {
		if n := recs[next].Count(name, ns, "before") + recs[next].Count(name, ns, "during"); n != 0 {
			return fmt.Errorf("%s reconciled %d requests of the paused cluster", next, n)
		}
		return nil
	})

	pause(t, false)
	recs[next].WaitFor(t, 1, name, ns, "before")
	recs[next].WaitFor(t, 1, name, ns, "during")
	fleettest.Consistently(t, 500*time.Millisecond, func() error {
		for _, cm := range []string{"before", "during"} {
			if n := recs[next].Count(name, ns, cm); n != 1 {
				return fmt.Errorf("%s reconciled %s %d times after the resume, want once", next, cm, n)
			}
		}
		return nil
	})
	if n := envs[next].tracker.Count(name); n != 1 {
		t.Errorf("%s engaged %q %d times, want once", next, name, n)
	}
}

// Another value than "true" or "false" does not pause: it is reported on the
// Secret, and the cluster stays engaged and unpaused.
func TestInvalidPausedAnnotationIsReportedAndDoesNotPause(t *testing.T) {
	ctx := context.Background()
	e := start(t)
	secret := e.secret(t, "odd-pause", 1)
	secret.Annotations = map[string]string{inventory.PausedAnnotation: "yes"}
	if err := e.host.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	e.waitForEvents(t, map[string]string{"odd-pause": inventory.ReasonInvalidPausedAnnotation})
	engine := e.mgr.(mcmanager.FleetOwner).Fleet()
	fleettest.Eventually(t, 30*time.Second, func() error {
		if s, _ := engine.State("odd-pause"); s != mcfleet.StateEngaged {
			return fmt.Errorf("odd-pause is %s, want engaged", s)
		}
		return nil
	})
	if s, _ := engine.Snapshot("odd-pause"); s.Paused {
		t.Error(`the annotation "yes" paused the cluster`)
	}
	if !contains(e.logs.String(), "Ignoring an invalid annotation") {
		t.Error("the invalid annotation was not logged")
	}
}

// An invalid value of the annotation as long as an annotation may be (200
// KB) is quoted bounded: the log line stays short, and the Event's note is
// one the API server accepts, so the Event is recorded.
func TestHugeInvalidPausedAnnotationIsReportedBounded(t *testing.T) {
	ctx := context.Background()
	e := start(t)
	secret := e.secret(t, "huge-pause", 1)
	value := "yes" + strings.Repeat("s", 200<<10)
	secret.Annotations = map[string]string{inventory.PausedAnnotation: value}
	if err := e.host.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	events := e.waitForEvents(t, map[string]string{"huge-pause": inventory.ReasonInvalidPausedAnnotation})
	for _, ev := range events {
		if ev.Reason == inventory.ReasonInvalidPausedAnnotation && !strings.Contains(ev.Note, `"yesss`) {
			t.Errorf("the Event does not quote the start of the value: %.200q", ev.Note)
		}
	}
	var line string
	fleettest.Eventually(t, 30*time.Second, func() error {
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, "Ignoring an invalid annotation") && strings.Contains(l, "huge-pause") {
				line = l
				return nil
			}
		}
		return fmt.Errorf("the invalid annotation was not logged")
	})
	if len(line) > 2048 {
		t.Errorf("the log line of the invalid annotation is %d bytes, want at most 2048: %.300s", len(line), line)
	}
}
