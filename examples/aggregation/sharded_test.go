package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// The example with three sharded replicas over six members (three names on
// each of two API servers) writes the summary a single replica writes,
// after every change, after a member leaves and joins, and after the
// replica that combines the summary (the host's owner) is killed and after
// another replica is killed.
func TestShardedSummaryEqualsTheSingleReplicaSummary(t *testing.T) {
	ctx := context.Background()
	hub := testbed.NewClient(t, fleet.Config(0))
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Summary.Namespace}}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	cfgs := map[multicluster.ClusterName]int{}
	for _, i := range []int{1, 2} {
		for j := range 3 {
			cfgs[fmt.Sprintf("m%d-%d", i, j)] = i
		}
	}
	opts := mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	var providers []*fleettest.NamedProvider
	newProvider := func() *fleettest.NamedProvider {
		p := fleettest.NewNamedProvider(fleet, cfgs)
		providers = append(providers, p)
		return p
	}

	// The reference: one replica, no sharding, its own summary object.
	single := types.NamespacedName{Namespace: Summary.Namespace, Name: "deployments-single"}
	ref, err := mcmanager.New(fleet.Config(0), newProvider(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupSummary(ctx, ref, single); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, ref)

	type replica struct {
		mgr  mcmanager.Manager
		stop func()
		host *testbed.Proxy
	}
	replicas := map[string]replica{}
	for _, name := range []string{"r1", "r2", "r3"} {
		hostCfg, proxy := testbed.Proxied(t, fleet.Config(0))
		mgr, err := mcmanager.New(hostCfg, newProvider(), opts, mcmanager.WithSharding(sharding.Options{
			Namespace: Summary.Namespace, Name: "aggregation-test", Identity: name,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := Setup(ctx, mgr); err != nil {
			t.Fatal(err)
		}
		replicas[name] = replica{mgr: mgr, stop: fleettest.RunManager(t, mgr), host: proxy}
	}

	members := []client.Client{nil, testbed.NewClient(t, fleet.Config(1)), testbed.NewClient(t, fleet.Config(2))}
	// want is the summary computed from the API servers themselves.
	want := func(names []multicluster.ClusterName) (string, error) {
		var lines []string
		for _, name := range names {
			var list appsv1.DeploymentList
			if err := members[cfgs[name]].List(ctx, &list); err != nil {
				return "", err
			}
			var line Line
			for _, d := range list.Items {
				line.Deployments++
				line.Replicas += ptr.Deref(d.Spec.Replicas, 0)
			}
			lines = append(lines, fmt.Sprintf("%s deployments=%d replicas=%d", name, line.Deployments, line.Replicas))
		}
		slices.Sort(lines)
		return strings.Join(lines, "\n"), nil
	}
	read := func(key types.NamespacedName) (string, error) {
		var cm corev1.ConfigMap
		if err := hub.Get(ctx, key, &cm); err != nil {
			return "", err
		}
		return cm.Data["summary"], nil
	}
	live := slices.Sorted(maps.Keys(cfgs))
	check := func(what string) {
		t.Helper()
		start := time.Now()
		fleettest.Eventually(t, time.Minute, func() error {
			expected, err := want(live)
			if err != nil {
				return err
			}
			ref, err := read(single)
			if err != nil {
				return fmt.Errorf("single replica: %w", err)
			}
			sharded, err := read(Summary)
			if err != nil {
				return fmt.Errorf("sharded replicas: %w", err)
			}
			if ref != expected {
				return fmt.Errorf("the single replica's summary is\n%s\nwant\n%s", ref, expected)
			}
			if sharded != ref {
				return fmt.Errorf("the sharded replicas' summary is\n%s\nthe single replica's\n%s", sharded, ref)
			}
			return nil
		})
		t.Logf("%s: the sharded summary equals the single replica's after %s", what, time.Since(start).Round(time.Millisecond))
	}
	hostOwner := func() string { // as the first live replica sees it
		for _, name := range slices.Sorted(maps.Keys(replicas)) {
			a := replicas[name].mgr.(interface{ Assignment() fleetreader.Assignment }).Assignment()
			return a.Owner(sharding.HostKey)
		}
		return ""
	}

	check("start")
	for _, d := range []*appsv1.Deployment{deployment("sh-web", 2), deployment("sh-api", 3)} {
		if err := members[1].Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		check("created " + d.Name + " in member 1")
	}
	web := deployment("sh-web", 4)
	if err := members[2].Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	check("created sh-web in member 2")
	web.Spec.Replicas = ptr.To[int32](1)
	if err := members[2].Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	check("scaled sh-web in member 2")

	for _, p := range providers {
		p.Remove("m2-1")
	}
	live = slices.DeleteFunc(live, func(n string) bool { return n == "m2-1" })
	check("m2-1 left")
	for _, p := range providers {
		p.Set("m2-1", 2)
	}
	live = slices.Sorted(maps.Keys(cfgs))
	check("m2-1 joined again")

	// Kill the replica that combines, then another: each time the summary
	// is whole again, and follows a change made meanwhile.
	for round := range 2 {
		var victim string
		fleettest.Eventually(t, time.Minute, func() error {
			victim = hostOwner()
			if _, ok := replicas[victim]; !ok {
				return fmt.Errorf("the host is assigned to %q, not a live replica", victim)
			}
			return nil
		})
		if round == 1 {
			for name := range replicas {
				if name != victim {
					victim = name
					break
				}
			}
		}
		replicas[victim].host.Cut()
		replicas[victim].stop()
		delete(replicas, victim)
		// Once the others see it gone, its clusters (and the host, in
		// round 0) move to them.
		fleettest.Eventually(t, time.Minute, func() error {
			for name, r := range replicas {
				if peers := r.mgr.(interface{ Assignment() fleetreader.Assignment }).Assignment().Peers(); slices.Contains(peers, victim) {
					return fmt.Errorf("%s still sees %s among %v", name, victim, peers)
				}
			}
			return nil
		})
		check(fmt.Sprintf("killed %s (round %d)", victim, round))
		d := deployment(fmt.Sprintf("after-kill-%d", round), int32(round+1))
		if err := members[1+round].Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("then created %s in member %d", d.Name, 1+round))
	}
}
