package multicluster

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// ClusterName identifies a cluster of the fleet. It is an alias so that plain
// strings work everywhere. The empty name is reserved for the host cluster.
type ClusterName = string

// ErrClusterNotFound is returned, wrapped, when a cluster is not (or no longer)
// part of the fleet. Reconcilers may return it; the ClusterNotFound wrapper in
// pkg/reconcile then drops the request instead of retrying it.
var ErrClusterNotFound = errors.New("cluster not found")

// ErrClusterNotConnected is returned, wrapped, for a cluster that is part of
// the fleet but does not answer its health probes (disconnected). Errors that
// wrap it also match ErrClusterNotFound, so that reconcilers which drop work
// for clusters that left drop it for disconnected ones too; the cluster's
// initial list re-enqueues everything once it is back.
var ErrClusterNotConnected = errors.New("cluster not connected")

// ErrAlreadyStarted is returned, wrapped, by the Start of a provider, an
// engine or a cluster of this module that runs already. Match it with
// errors.Is, never by text; fleet.AlreadyStarted also recognises
// controller-runtime's own answer to a second Start of a cluster.
var ErrAlreadyStarted = errors.New("already started")

// NotConnectedError returns the error for a disconnected cluster: it matches
// both ErrClusterNotConnected and ErrClusterNotFound.
func NotConnectedError(name ClusterName) error { return &notConnectedError{name: name} }

type notConnectedError struct{ name ClusterName }

func (e *notConnectedError) Error() string {
	return fmt.Sprintf("cluster %q: %v", e.name, ErrClusterNotConnected)
}

func (e *notConnectedError) Unwrap() []error {
	return []error{ErrClusterNotConnected, ErrClusterNotFound}
}

// Aware is implemented by everything that works per cluster: the manager,
// controllers, and users' runnables.
type Aware interface {
	// Engage starts work for a cluster. ctx lives as long as the engagement:
	// cancelling it disengages the cluster and stops everything started for it.
	//
	// Engage is idempotent for the same name and cluster instance; engaging a
	// name with a different instance replaces the previous engagement. It
	// returns promptly: it never waits on the network without a bound.
	Engage(ctx context.Context, name ClusterName, cl cluster.Cluster) error
}

// Provider knows which clusters form the fleet and how to reach them.
type Provider interface {
	// Get returns the cluster with the given name, or an error wrapping
	// ErrClusterNotFound if the provider does not know it.
	Get(ctx context.Context, clusterName ClusterName) (cluster.Cluster, error)

	// IndexField registers a field index on every cluster the provider has
	// engaged and on every cluster it engages later.
	IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error
}

// ProviderRunnable is a Provider with a discovery loop. The manager runs it
// when it starts; users never call Start themselves.
type ProviderRunnable interface {
	// Start discovers clusters and engages them with aware. It blocks until ctx
	// is done.
	Start(ctx context.Context, aware Aware) error
}

// ListingProvider is implemented by a ProviderRunnable that can tell when it
// has handed the manager every cluster it found at start-up. The manager's
// readiness check "clusters" waits for it, bounded (see
// mcmanager.WithListingTimeout): a replica is not Ready before it knows its
// fleet. Providers that do not implement it are not waited for.
type ListingProvider interface {
	// Listed is closed once every cluster the provider found at start-up has
	// been published or engaged. It stays open if Start fails before.
	Listed() <-chan struct{}
}

// AwareFunc adapts a function to Aware.
type AwareFunc func(ctx context.Context, name ClusterName, cl cluster.Cluster) error

// Engage calls f.
func (f AwareFunc) Engage(ctx context.Context, name ClusterName, cl cluster.Cluster) error {
	return f(ctx, name, cl)
}

var _ Aware = AwareFunc(nil)
