package status_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"k8s.io/client-go/rest"
)

// fakeCluster is a pre-built cluster that the application runs already and
// whose cache has synced: all the engine asks of a member it does not probe.
// A listing needs no more (the endpoint on real control planes is tested in
// pkg/manager).
type fakeCluster struct{ cluster.Cluster }

func (fakeCluster) Start(context.Context) error { return multicluster.ErrAlreadyStarted }
func (fakeCluster) GetCache() cache.Cache       { return syncedCache{} }

// GetConfig is asked of every member, to learn the credentials to redact from
// what it says.
func (fakeCluster) GetConfig() *rest.Config { return &rest.Config{Host: "https://fake.invalid"} }

type syncedCache struct{ cache.Cache }

func (syncedCache) WaitForCacheSync(context.Context) bool { return true }

// fakeFleet is an engine running n members through its public API, named
// cluster-00000 on: one in 50 cannot be built (disconnected, with a last
// error), one in 100 is paused, the others are engaged.
func fakeFleet(tb testing.TB, n int) *fleet.Engine {
	return fakeFleetWith(tb, n, nil)
}

// fakeFleetWith is fakeFleet under an admission: the members it does not
// own wait (wanted).
func fakeFleetWith(tb testing.TB, n int, adm fleet.Admission) *fleet.Engine {
	tb.Helper()
	e := fleet.New(fleet.Options{Health: fleet.HealthOptions{Disabled: true}, MinBackoff: time.Hour, MaxBackoff: time.Hour, Admission: adm})
	for i := range n {
		m := fleet.Member{Name: fmt.Sprintf("cluster-%05d", i), Hash: "1", Paused: i%100 == 1}
		if i%50 == 7 {
			m.Build = func(context.Context) (cluster.Cluster, error) {
				return nil, errors.New("dial tcp 10.0.0.7:6443: connect: connection refused (token=hunter2 at https://admin:secret@member.example/?token=abc; its token read from /etc/fleet/tokens/east)")
			}
		} else {
			m.Cluster = fakeCluster{}
		}
		e.SetMember(m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
	fleettest.Eventually(tb, time.Minute, func() error {
		settled := 0
		for _, s := range e.Clusters() {
			if s.State == fleet.StateEngaged || s.State == fleet.StateDisconnected || (adm != nil && !adm.Owns(s.Name)) {
				settled++
			}
		}
		if settled != n {
			return fmt.Errorf("%d of %d members settled", settled, n)
		}
		return nil
	})
	return e
}

// replicas is a sharding admission of two replicas, "replica-a" and
// "replica-b", that names the owner of each cluster (fleet.OwnerReporter, as
// the sharding coordinator does): this replica is replica-a, and owns the
// clusters whose number is even.
type replicas struct{}

func (replicas) Owner(name string) string {
	if n := name[len(name)-1]; (n-'0')%2 == 0 {
		return "replica-a"
	}
	return "replica-b"
}
func (r replicas) Owns(name string) bool  { return r.Owner(name) == "replica-a" }
func (replicas) Changed() <-chan struct{} { return nil }
func (replicas) Acquire(context.Context, string) (context.Context, func(), error) {
	fenced, release := context.WithCancel(context.Background())
	return fenced, release, nil
}

var (
	_ fleet.Admission     = replicas{}
	_ fleet.OwnerReporter = replicas{}
)
