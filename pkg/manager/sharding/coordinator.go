package sharding

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Errors that end a fenced context (see context.Cause).
var (
	// ErrFenceLost: this replica could not renew its replica Lease within
	// RenewDeadline, or another replica took the fence over.
	ErrFenceLost = errors.New("sharding: fence lost")
	// ErrStopping: the coordinator is stopping; the engine should stop the
	// cluster and release the fence.
	ErrStopping = errors.New("sharding: coordinator stopping")
	// ErrReleased: the fence was released by its holder.
	ErrReleased = errors.New("sharding: fence released")
)

// Coordinator shares a fleet between the replicas of one controller. See the
// package documentation.
type Coordinator struct {
	opts         Options
	log          logr.Logger
	leases       coordinationclient.LeaseInterface
	renewals     coordinationclient.LeaseInterface
	replicaLease string

	mu      sync.Mutex
	started bool
	synced  bool
	// stopping is set when Start's ctx ends: Owns is false from then on.
	stopping bool
	// runCtx is Start's ctx: fenced contexts derive from it.
	runCtx context.Context
	// lastRenew is when the last successful renewal of the replica Lease was
	// sent: this replica's clusters are its own until lastRenew+RenewDeadline.
	lastRenew time.Time
	// active is whether lastRenew is recent enough: it gates Owns and Acquire.
	active   bool
	replicas map[string]*replica
	peers    []peer
	changed  chan struct{}
	// notify is closed (and replaced) on every Lease event and live-set change,
	// to wake Acquire calls that wait for a fence.
	notify chan struct{}
	held   map[string]*fence
	store  cache.Store
	// stale are replica Leases of replicas silent for staleAfter lease
	// durations, for the loop to delete.
	stale []replica
	// incarnation tells this process from others given the same Identity.
	incarnation string
	// foreignRV and foreignSince track the replica Lease of this identity as
	// another process wrote it (see checkForeign).
	foreignRV    string
	foreignSince time.Time
	// unreleased are fences whose release failed, by cluster, with the
	// Lease as written: the loop retries them.
	unreleased map[string]*coordinationv1.Lease
	// acquiring counts Acquire calls in progress, by cluster.
	acquiring map[string]int
	// deadline fires at lastRenew+RenewDeadline.
	deadline *time.Timer
	// replicaRV is the resourceVersion of our replica Lease after our last write.
	replicaRV string
}

// staleAfter is how many lease durations past expiry a silent replica's replica
// Lease is kept before it is deleted.
const staleAfter = 10

// replica is what this replica observed of a peer's replica Lease. Expiry is
// measured on the local clock from the moment a renewal was *observed*, not from
// the time written in the Lease, so that clock skew between replicas cannot
// shorten a peer's lease (the rule client-go's leader election follows).
type replica struct {
	identity   string
	weight     int
	renewTime  string
	rv         string
	observedAt time.Time
	deleted    bool
}

// fence is a cluster's fence held by this replica.
type fence struct {
	cluster   string
	leaseName string
	ctx       context.Context
	cancel    context.CancelCauseFunc
	rv        string
	lease     *coordinationv1.Lease
	// seen is set once the watch delivered our own write: events before it are
	// older (a watch delivers in order) and say nothing about the fence now.
	seen bool
}

var _ manager.Runnable = &Coordinator{}
var _ manager.LeaderElectionRunnable = &Coordinator{}

// New returns a coordinator that keeps its Leases on the host cluster at cfg.
// It needs get, list, watch, create, update and delete on
// coordination.k8s.io Leases in Options.Namespace. Nothing runs before Start.
func New(cfg *rest.Config, opts Options) (*Coordinator, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cs, err := coordinationclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("sharding: building the Lease client: %w", err)
	}
	// Renewals get a client of their own, with its own rate limiter: a burst of
	// fence writes during a hand-off must not delay the renewal that keeps this
	// replica's clusters (which would make it give them all up).
	renewCfg := rest.CopyConfig(cfg)
	renewCfg.RateLimiter = nil
	renewCS, err := coordinationclient.NewForConfig(renewCfg)
	if err != nil {
		return nil, fmt.Errorf("sharding: building the Lease client: %w", err)
	}
	var log logr.Logger
	if opts.Logger != nil {
		log = *opts.Logger
	} else {
		log = logf.Log.WithName("sharding")
	}
	return &Coordinator{
		opts:         opts,
		log:          log.WithValues("replica", opts.Identity, "group", opts.Name),
		leases:       cs.Leases(opts.Namespace),
		renewals:     renewCS.Leases(opts.Namespace),
		replicaLease: leaseName(opts.Name, roleReplica, opts.Identity),
		incarnation:  randomHex(8),
		replicas:     map[string]*replica{},
		changed:      make(chan struct{}),
		notify:       make(chan struct{}),
		held:         map[string]*fence{},
		acquiring:    map[string]int{},
	}, nil
}

// Identity is this replica's identity.
func (c *Coordinator) Identity() string { return c.opts.Identity }

// NeedLeaderElection is false: sharding replaces leader election.
func (c *Coordinator) NeedLeaderElection() bool { return false }

// MaxDrain bounds how long the engine may wait, once it stopped a cluster, for
// reconciles in flight before it releases the cluster's fence
// (fleet.DrainBound): a replica that notices at RenewDeadline that it lost
// its fences has LeaseDuration − RenewDeadline before peers take them over,
// less one RetryPeriod of margin for the clock of the observing peer.
func (c *Coordinator) MaxDrain() time.Duration {
	window := c.opts.LeaseDuration - c.opts.RenewDeadline
	return max(window-c.opts.RetryPeriod, window/2)
}

// Owns reports whether the cluster is assigned to this replica now. It is false
// before Start has registered this replica and seen its peers, while this
// replica cannot renew its replica Lease, and once it is stopping.
func (c *Coordinator) Owns(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced || !c.active || c.stopping {
		return false
	}
	return c.ownerLocked(name) == c.opts.Identity
}

// Owner returns the identity of the replica the cluster is assigned to, as this
// replica sees the group now ("" before Start has seen it).
func (c *Coordinator) Owner(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced {
		return ""
	}
	return c.ownerLocked(name)
}

// Peers returns the identities of the live replicas this replica sees, itself
// included, sorted; nil until Start has seen the group.
func (c *Coordinator) Peers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced {
		return nil
	}
	out := make([]string, len(c.peers))
	for i, p := range c.peers {
		out[i] = p.identity
	}
	return out
}

// Changed returns a channel that is closed when the assignment may have changed
// (a peer joined or left, this replica became able or unable to renew, it
// finished starting or began stopping). Call Changed again for the next change.
func (c *Coordinator) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Start registers this replica, follows its peers and renews its replica Lease
// until ctx ends. Then it ends every fenced context, deletes the replica Lease
// (peers reassign its clusters at once) and waits up to RenewDeadline for the
// fences to be released. It returns an error if the replica cannot register.
func (c *Coordinator) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return fmt.Errorf("sharding: coordinator %w", multicluster.ErrAlreadyStarted)
	}
	c.started = true
	c.runCtx = ctx
	c.mu.Unlock()

	// The renewal deadline is enforced by a timer of its own, so that a renewal
	// request that hangs cannot delay giving the clusters up.
	deadline := time.AfterFunc(time.Hour, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.recomputeLocked(time.Now())
	})
	deadline.Stop()
	c.mu.Lock()
	c.deadline = deadline
	c.mu.Unlock()
	defer deadline.Stop()

	if err := c.join(ctx); err != nil {
		c.mu.Lock()
		c.stopping = true
		c.signalChangedLocked()
		c.mu.Unlock()
		return fmt.Errorf("sharding: registering replica %q in Lease %s/%s: %w", c.opts.Identity, c.opts.Namespace, c.replicaLease, err)
	}
	informer := c.newInformer()
	_ = informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		c.log.Error(err, "watching the group's Leases failed; retrying", "namespace", c.opts.Namespace)
	})
	stopInformer := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { informer.Run(stopInformer) })
	defer func() { close(stopInformer); wg.Wait() }()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		c.shutdown()
		return nil
	}
	c.mu.Lock()
	c.synced = true
	c.recomputeLocked(time.Now())
	c.signalChangedLocked()
	c.mu.Unlock()
	c.log.Info("replica joined", "peers", c.Peers())

	// Failed releases are retried beside the loop, so that a slow API server
	// cannot hold renewals up.
	loopCtx, stopRetries := context.WithCancel(ctx)
	wg.Go(func() {
		t := time.NewTicker(c.opts.RetryPeriod)
		defer t.Stop()
		for {
			select {
			case <-loopCtx.Done():
				return
			case <-t.C:
				c.retryReleases()
			}
		}
	})
	defer stopRetries()

	c.loop(ctx)
	c.shutdown()
	return nil
}

// shutdown ends every fenced context, deletes the replica Lease and waits up to
// RenewDeadline for the fences to be released.
func (c *Coordinator) shutdown() {
	c.mu.Lock()
	c.stopping = true
	for _, f := range c.held {
		f.cancel(ErrStopping)
	}
	c.signalChangedLocked()
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RenewDeadline)
	defer cancel()
	c.mu.Lock()
	rv := c.replicaRV
	c.mu.Unlock()
	// Only our own version: never the Lease of another process with our identity.
	if rv != "" {
		err := c.leases.Delete(ctx, c.replicaLease, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil && !apierrors.IsNotFound(err) {
			c.log.Error(err, "deleting the replica Lease failed: peers take over when it expires", "lease", c.replicaLease)
		}
	}
	for {
		c.mu.Lock()
		n, ch := len(c.held), c.notify
		c.mu.Unlock()
		if n == 0 {
			c.log.Info("replica left")
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			c.mu.Lock()
			names := make([]string, 0, len(c.held))
			for name := range c.held {
				names = append(names, name)
			}
			c.mu.Unlock()
			fenceEvents.WithLabelValues(c.opts.Name, eventReleaseFailed).Add(float64(len(names)))
			c.log.Error(ctx.Err(), "fences not released within RenewDeadline: peers take them over when this replica's lease expires", "clusters", names)
			return
		}
	}
}
