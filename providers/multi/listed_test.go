package multi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/nop"
)

// listingProvider lists when the test says so.
type listingProvider struct{ listed chan struct{} }

func newListing() *listingProvider { return &listingProvider{listed: make(chan struct{})} }

func (p *listingProvider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return nil, fmt.Errorf("cluster %q: %w", name, multicluster.ErrClusterNotFound)
}
func (p *listingProvider) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}
func (p *listingProvider) Start(ctx context.Context, _ multicluster.Aware) error {
	<-ctx.Done()
	return nil
}
func (p *listingProvider) Listed() <-chan struct{} { return p.listed }

func isClosed(ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	default:
		return errors.New("not listed")
	}
}

func startMulti(t *testing.T, m *Provider) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Start(ctx, fleettest.NewTracker()) }()
	t.Cleanup(func() { cancel(); <-done })
}

// The multi provider has listed once every inner provider that lists has;
// one that does not list holds nothing back.
func TestListedWhenEveryListingProviderHasListed(t *testing.T) {
	m := New(Options{})
	a, b := newListing(), newListing()
	for prefix, p := range map[string]multicluster.Provider{"a": a, "b": b, "c": struct{ multicluster.Provider }{nop.New()}} {
		if err := m.AddProvider(prefix, p); err != nil {
			t.Fatal(err)
		}
	}
	startMulti(t, m)
	close(a.listed)
	fleettest.Consistently(t, 200*time.Millisecond, func() error {
		if isClosed(m.Listed()) == nil {
			return errors.New("listed while provider b has not")
		}
		return nil
	})
	close(b.listed)
	fleettest.Eventually(t, 0, func() error { return isClosed(m.Listed()) })
}

// A provider removed before it listed is not waited for.
func TestListedDoesNotWaitForARemovedProvider(t *testing.T) {
	m := New(Options{})
	if err := m.AddProvider("never", newListing()); err != nil {
		t.Fatal(err)
	}
	startMulti(t, m)
	m.RemoveProvider("never")
	fleettest.Eventually(t, 0, func() error { return isClosed(m.Listed()) })
}
