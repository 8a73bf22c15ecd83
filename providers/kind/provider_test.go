package kind_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/kind"
)

// lister stands in for kind: clusters are real control planes, listed under
// names the test chooses.
type lister struct {
	mu       sync.Mutex
	clusters map[string]string // name -> kubeconfig
	err      error
	listed   int
}

func (l *lister) List() ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listed++
	if l.err != nil {
		return nil, l.err
	}
	return slices.Sorted(maps.Keys(l.clusters)), nil
}

func (l *lister) KubeConfig(name string, internal bool) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if internal {
		return "", errors.New("the provider must ask for the host's view of the cluster")
	}
	kc, ok := l.clusters[name]
	if !ok {
		return "", errors.New("unknown cluster")
	}
	return kc, nil
}

func (l *lister) set(name, kubeconfig string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clusters[name] = kubeconfig
}

func (l *lister) remove(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.clusters, name)
}

func (l *lister) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

func (l *lister) listings() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.listed
}

// run runs a manager on control plane 0 with p until the test ends.
func run(t *testing.T, p *kind.Provider) *fleettest.Tracker {
	t.Helper()
	tr := fleettest.NewTracker()
	mgr, err := mcmanager.New(fleet.Config(0), p, mcmanager.Options{
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(tr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logf.IntoContext(context.Background(), funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{})))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager returned %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("manager did not stop")
		}
	})
	return tr
}

func TestEngagePrefixRemoveAndRecreate(t *testing.T) {
	kc1, kc2 := kubeconfig(t, 1, "kind-a"), kubeconfig(t, 2, "kind-b")
	l := &lister{clusters: map[string]string{"fleet-a": kc1, "fleet-b": kc2, "other": kc1}}
	var qps float32
	p := kind.New(kind.Options{
		Prefix:      "fleet-",
		Lister:      l,
		Interval:    100 * time.Millisecond,
		RESTOptions: []func(*rest.Config) error{func(c *rest.Config) error { c.QPS = 42; return nil }},
	})
	tr := run(t, p)

	first := expectEngaged(t, tr, map[string]identity{"fleet-a": {Member: 1, Kubeconfig: kc1}, "fleet-b": {Member: 2, Kubeconfig: kc2}})
	qps = first["fleet-a"].GetConfig().QPS
	if qps != 42 {
		t.Errorf("RESTOptions not applied: QPS %v, want 42", qps)
	}
	if _, err := p.Get(context.Background(), "fleet-a"); err != nil {
		t.Errorf("Get of an engaged cluster: %v", err)
	}

	// Recreated under the same name: kind writes new certificates, and the
	// cluster may come back on another port. The new instance replaces the old.
	recreated := kubeconfig(t, 0, "kind-b-again")
	l.set("fleet-b", recreated)
	second := expectEngaged(t, tr, map[string]identity{"fleet-a": {Member: 1, Kubeconfig: kc1}, "fleet-b": {Member: 0, Kubeconfig: recreated}})
	if second["fleet-b"] == first["fleet-b"] {
		t.Error("the recreated cluster was not replaced")
	}
	if second["fleet-a"] != first["fleet-a"] {
		t.Error("recreating one cluster replaced another")
	}

	// Deleted: disengaged, and Get says so.
	l.remove("fleet-a")
	expectEngaged(t, tr, map[string]identity{"fleet-b": {Member: 0, Kubeconfig: recreated}})
	fleettest.Eventually(t, time.Minute, func() error {
		if _, err := p.Get(context.Background(), "fleet-a"); !errors.Is(err, multicluster.ErrClusterNotFound) {
			return errors.New("Get of a deleted cluster does not wrap ErrClusterNotFound")
		}
		return nil
	})
}

func TestListingErrorsAndBadKubeconfigsKeepTheFleet(t *testing.T) {
	kc1 := kubeconfig(t, 1, "kind-c")
	l := &lister{clusters: map[string]string{"good": kc1, "bad": "not: [a kubeconfig"}}
	tr := run(t, kind.New(kind.Options{Lister: l, Interval: 100 * time.Millisecond}))
	expectEngaged(t, tr, map[string]identity{"good": {Member: 1, Kubeconfig: kc1}})

	// A failing listing (kind or the container runtime is down) changes nothing.
	l.fail(errors.New("docker is not running"))
	n := l.listings()
	fleettest.Eventually(t, time.Minute, func() error {
		if l.listings() < n+3 {
			return errors.New("the provider has not listed again")
		}
		return nil
	})
	expectEngaged(t, tr, map[string]identity{"good": {Member: 1, Kubeconfig: kc1}})

	// Once listing works again, new clusters come, including a fixed one.
	kc2 := kubeconfig(t, 2, "kind-d")
	l.set("bad", kc2)
	l.fail(nil)
	expectEngaged(t, tr, map[string]identity{"good": {Member: 1, Kubeconfig: kc1}, "bad": {Member: 2, Kubeconfig: kc2}})
}

// Listed (what the manager's readiness waits for) is closed only once kind
// could list the clusters: a failing listing does not count.
func TestListedAfterTheFirstSuccessfulListing(t *testing.T) {
	l := &lister{clusters: map[string]string{"c": kubeconfig(t, 1, "kind-c")}}
	l.fail(errors.New("docker is not running"))
	p := kind.New(kind.Options{Lister: l, Interval: 50 * time.Millisecond})
	run(t, p)
	fleettest.Eventually(t, time.Minute, func() error {
		if l.listings() < 3 {
			return errors.New("the provider has not listed yet")
		}
		return nil
	})
	select {
	case <-p.Listed():
		t.Fatal("Listed closed although every listing failed")
	default:
	}
	l.fail(nil)
	select {
	case <-p.Listed():
	case <-time.After(time.Minute):
		t.Fatal("Listed not closed within a minute of a successful listing")
	}
}

// A RESTOptions error leaves its cluster out, naming it; the other clusters
// are engaged with the options applied.
func TestRESTOptionsErrorLeavesTheClusterOut(t *testing.T) {
	kc1, kc2 := kubeconfig(t, 1, "kind-a"), kubeconfig(t, 2, "kind-b")
	l := &lister{clusters: map[string]string{"good": kc1, "refused": kc2}}
	refusedHost := fleet.Config(2).Host
	p := kind.New(kind.Options{
		Lister:   l,
		Interval: 100 * time.Millisecond,
		RESTOptions: []func(*rest.Config) error{func(c *rest.Config) error {
			if c.Host == refusedHost {
				return errors.New("no QPS for this one")
			}
			return nil
		}},
	})
	tr := run(t, p)
	expectEngaged(t, tr, map[string]identity{"good": {Member: 1, Kubeconfig: kc1}})
	if _, err := p.Get(t.Context(), "refused"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("Get of the cluster its RESTOptions refused: %v, want ErrClusterNotFound", err)
	}
}
