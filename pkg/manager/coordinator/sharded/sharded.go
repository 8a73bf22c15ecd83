// Package sharded is the upstream design's sharded coordinator, mapped onto
// this project's sharding (package sharding): an upstream program that
// shards its fleet with
//
//	mcmanager.New(cfg, provider, opts, mcmanager.WithCoordinator(sharded.New(kube, log, ...)))
//
// gets, with only its import prefix changed, replicas that each run their
// share of the clusters, every cluster behind a per-cluster Lease fence that
// is released only after the cluster's cache stopped and its reconciles
// drained, and admission before a cluster's cache starts. The options map
// onto sharding.Options; those that would let two replicas run one cluster
// (turning per-cluster Leases off, or an assignment the replicas do not share)
// are refused with an error saying so.
package sharded

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
)

// Coordinator is the sharding an upstream program asks for. Give it to
// mcmanager.WithCoordinator.
type Coordinator struct {
	opts sharding.Options
	errs []error
}

var _ mcmanager.Coordinator = &Coordinator{}

// Option configures a Coordinator.
type Option func(*Coordinator)

// New returns a coordinator with opts. kube is the upstream design's client
// of the host cluster: here the Leases are read and written through the
// manager's own connection to the host (the one mcmanager.New is given), so
// kube must reach the same cluster, and is used for nothing else. log gets
// the coordinator's hand-offs, fence losses and renewal failures.
func New(kube client.Client, log logr.Logger, opts ...Option) *Coordinator {
	c := &Coordinator{}
	if log.GetSink() != nil {
		c.opts.Logger = &log
	}
	_ = kube // see the comment above: the manager's connection is used
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// ShardingOptions returns the sharding.Options the coordinator stands for,
// or the errors of the options that cannot be honoured.
func (c *Coordinator) ShardingOptions() (sharding.Options, error) {
	if err := errors.Join(c.errs...); err != nil {
		return sharding.Options{}, fmt.Errorf("sharded coordinator: %w", err)
	}
	return c.opts, nil
}

// WithShardLease names the group of replicas: their Leases live in namespace
// and are named after name (sharding.Options Namespace and Name).
func WithShardLease(namespace, name string) Option {
	return func(c *Coordinator) { c.opts.Namespace, c.opts.Name = namespace, name }
}

// WithPerClusterLease(true) is how clusters are always run here: each behind
// a Lease of its own (a fence). false is refused: without per-cluster Leases
// two replicas could run one cluster while its ownership moves.
func WithPerClusterLease(enabled bool) Option {
	return func(c *Coordinator) {
		if !enabled {
			c.errs = append(c.errs, errors.New("WithPerClusterLease(false) is not supported: every cluster is run behind a Lease fence of its own, so that no two replicas run it at once"))
		}
	}
}

// WithPeerWeight sets this replica's weight: it is assigned about
// weight/sum(weights) of the clusters (sharding.Options.Weight).
func WithPeerWeight(weight uint32) Option {
	return func(c *Coordinator) {
		if weight == 0 {
			c.errs = append(c.errs, errors.New("WithPeerWeight(0): a replica of weight 0 would run nothing; stop it instead"))
			return
		}
		c.opts.Weight = int(weight)
	}
}

// WithLeaseTimings sets the Lease timings: duration is how long peers wait
// for a silent replica (sharding.Options.LeaseDuration), renew how long this
// replica keeps its clusters without renewing (RenewDeadline), and throttle
// the interval between renewals (RetryPeriod).
func WithLeaseTimings(duration, renew, throttle time.Duration) Option {
	return func(c *Coordinator) {
		c.opts.LeaseDuration, c.opts.RenewDeadline, c.opts.RetryPeriod = duration, renew, throttle
	}
}

// WithSynchronizationIntervals is refused: here replicas see each other's
// Leases through a watch and reassign clusters as soon as one changes, with
// no probe or rehash interval to set. Tune how fast a lost replica's clusters
// move with WithLeaseTimings.
func WithSynchronizationIntervals(probe, rehash time.Duration) Option {
	return func(c *Coordinator) {
		c.errs = append(c.errs, fmt.Errorf("WithSynchronizationIntervals(%s, %s) has no effect here: peers are watched and clusters reassigned at once; use WithLeaseTimings", probe, rehash))
	}
}

// WithSharder is refused: every replica must compute the same assignment,
// which here is weighted rendezvous hashing of cluster names over the live
// replicas; weigh replicas with WithPeerWeight.
func WithSharder(sharder any) Option {
	return func(c *Coordinator) {
		c.errs = append(c.errs, fmt.Errorf("WithSharder(%T) is not supported: clusters are assigned by weighted rendezvous hashing; use WithPeerWeight", sharder))
	}
}

// WithPeerRegistry is refused: the replicas are the holders of the group's
// replica Leases, which the fences rely on.
func WithPeerRegistry(registry any) Option {
	return func(c *Coordinator) {
		c.errs = append(c.errs, fmt.Errorf("WithPeerRegistry(%T) is not supported: the replicas are the holders of the group's replica Leases", registry))
	}
}
