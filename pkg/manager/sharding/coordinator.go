package sharding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Errors that end a fenced context (see context.Cause).
var (
	// ErrFenceLost: this replica could not renew its member Lease within
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
	opts       Options
	log        logr.Logger
	leases     coordinationclient.LeaseInterface
	renewals   coordinationclient.LeaseInterface
	memberName string

	mu      sync.Mutex
	started bool
	synced  bool
	// stopping is set when Start's ctx ends: Owns is false from then on.
	stopping bool
	// runCtx is Start's ctx: fenced contexts derive from it.
	runCtx context.Context
	// lastRenew is when the last successful renewal of the member Lease was
	// sent: this replica's clusters are its own until lastRenew+RenewDeadline.
	lastRenew time.Time
	// active is whether lastRenew is recent enough: it gates Owns and Acquire.
	active  bool
	members map[string]*member
	peers   []peer
	changed chan struct{}
	// notify is closed (and replaced) on every Lease event and live-set change,
	// to wake Acquire calls that wait for a fence.
	notify chan struct{}
	held   map[string]*fence
	store  cache.Store
	// stale are member Leases of replicas silent for staleAfter lease
	// durations, for the loop to delete.
	stale []member
	// incarnation tells this process from others given the same Identity.
	incarnation string
	// foreignRV and foreignSince track the member Lease of this identity as
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
	// memberRV is the resourceVersion of our member Lease after our last write.
	memberRV string
}

// staleAfter is how many lease durations past expiry a silent replica's member
// Lease is kept before it is deleted.
const staleAfter = 10

// member is what this replica observed of a peer's member Lease. Expiry is
// measured on the local clock from the moment a renewal was *observed*, not from
// the time written in the Lease, so that clock skew between replicas cannot
// shorten a peer's lease (the rule client-go's leader election follows).
type member struct {
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
		opts:        opts,
		log:         log.WithValues("replica", opts.Identity, "group", opts.Name),
		leases:      cs.Leases(opts.Namespace),
		renewals:    renewCS.Leases(opts.Namespace),
		memberName:  leaseName(opts.Name, roleMember, opts.Identity),
		incarnation: randomHex(8),
		members:     map[string]*member{},
		changed:     make(chan struct{}),
		notify:      make(chan struct{}),
		held:        map[string]*fence{},
		acquiring:   map[string]int{},
	}, nil
}

// Identity is this replica's identity.
func (c *Coordinator) Identity() string { return c.opts.Identity }

// NeedLeaderElection is false: sharding replaces leader election.
func (c *Coordinator) NeedLeaderElection() bool { return false }

// Owns reports whether the cluster is assigned to this replica now. It is false
// before Start has registered this replica and seen its peers, while this
// replica cannot renew its member Lease, and once it is stopping.
func (c *Coordinator) Owns(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced || !c.active || c.stopping {
		return false
	}
	return owner(c.peers, name) == c.opts.Identity
}

// Owner returns the identity of the replica the cluster is assigned to, as this
// replica sees the group now ("" before Start has seen it).
func (c *Coordinator) Owner(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced {
		return ""
	}
	return owner(c.peers, name)
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

// Start registers this replica, follows its peers and renews its member Lease
// until ctx ends. Then it ends every fenced context, deletes the member Lease
// (peers reassign its clusters at once) and waits up to RenewDeadline for the
// fences to be released. It returns an error if the replica cannot register.
func (c *Coordinator) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("sharding: coordinator already started")
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
		return fmt.Errorf("sharding: registering replica %q in Lease %s/%s: %w", c.opts.Identity, c.opts.Namespace, c.memberName, err)
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

// join creates the member Lease, retrying every RetryPeriod for up to
// RenewDeadline: a short outage at start-up is not fatal, a lasting one (such as
// missing RBAC) is reported.
func (c *Coordinator) join(ctx context.Context) error {
	giveUp := time.Now().Add(c.opts.RenewDeadline)
	for {
		rctx, cancel := context.WithTimeout(ctx, c.opts.RenewDeadline/2)
		err := c.renew(rctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, errIdentityInUse) {
			giveUp = time.Now().Add(c.opts.RenewDeadline) // waiting for the other process, not failing
		} else if time.Now().Add(c.opts.RetryPeriod).After(giveUp) {
			return err
		}
		c.log.Error(err, "registering this replica failed; retrying", "lease", c.memberName)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.opts.RetryPeriod):
		}
	}
}

// loop renews the member Lease every RetryPeriod and re-evaluates expiries when
// they fall due.
func (c *Coordinator) loop(ctx context.Context) {
	renewAt := time.Now().Add(c.opts.RetryPeriod)
	timer := time.NewTimer(c.opts.RetryPeriod)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		if !now.Before(renewAt) {
			rctx, cancel := context.WithTimeout(ctx, c.opts.RenewDeadline/2)
			if err := c.renew(rctx); err != nil && ctx.Err() == nil {
				renewalFailures.WithLabelValues(c.opts.Name).Inc()
				c.log.Error(err, "renewing the member Lease failed", "lease", c.memberName)
			}
			cancel()
			renewAt = time.Now().Add(c.opts.RetryPeriod)
		}
		c.mu.Lock()
		next := c.recomputeLocked(time.Now())
		stale := c.stale
		c.stale = nil
		c.mu.Unlock()
		for _, m := range stale {
			c.deleteStale(ctx, m)
		}
		if next.IsZero() || next.After(renewAt) {
			next = renewAt
		}
		timer.Reset(max(time.Until(next), time.Millisecond))
	}
}

// deleteStale deletes the member Lease of a replica that has been silent for
// long, unless it renewed meanwhile.
func (c *Coordinator) deleteStale(ctx context.Context, m member) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RenewDeadline/2)
	defer cancel()
	name := leaseName(c.opts.Name, roleMember, m.identity)
	err := c.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &m.rv}})
	switch {
	case err == nil:
		c.log.Info("deleted the member Lease of a replica silent for long", "peer", m.identity, "lease", name)
	case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
		c.log.Error(err, "deleting a stale member Lease failed", "peer", m.identity, "lease", name)
	}
}

// errIdentityInUse: the member Lease of this identity is renewed by another
// process (a duplicate Identity, or this replica's previous incarnation).
var errIdentityInUse = errors.New("sharding: member Lease renewed by another process with the same identity")

// checkForeign allows taking over a member Lease of this identity written by
// another process only once that process has been silent for LeaseDuration (as
// observed here): a restarted replica with a stable identity waits for its
// previous incarnation to have given its clusters up, and two processes given
// the same identity never both run.
func (c *Coordinator) checkForeign(cur *coordinationv1.Lease) error {
	if cur.Annotations[annotationIncarnation] == c.incarnation {
		return nil
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur.ResourceVersion != c.foreignRV {
		c.foreignRV, c.foreignSince = cur.ResourceVersion, now
	}
	if wait := c.foreignSince.Add(c.opts.LeaseDuration).Sub(now); wait > 0 {
		return fmt.Errorf("%w: Lease %s/%s, taking it over if it stays silent for %s", errIdentityInUse, c.opts.Namespace, c.memberName, wait.Round(time.Millisecond))
	}
	return nil
}

// renew writes the member Lease (creating it if needed) and records when the
// request was sent.
func (c *Coordinator) renew(ctx context.Context) error {
	sent := time.Now()
	c.mu.Lock()
	rv := c.memberRV
	c.mu.Unlock()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:            c.memberName,
			Namespace:       c.opts.Namespace,
			ResourceVersion: rv,
			Labels:          map[string]string{LabelGroup: c.opts.Name, LabelRole: roleMember},
			Annotations:     map[string]string{AnnotationWeight: strconv.Itoa(c.opts.Weight), annotationIncarnation: c.incarnation},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(c.opts.Identity),
			LeaseDurationSeconds: ptr.To(int32((c.opts.LeaseDuration + time.Second - 1) / time.Second)),
			RenewTime:            ptr.To(metav1.NewMicroTime(sent)),
		},
	}
	var out *coordinationv1.Lease
	var err error
	if rv == "" {
		out, err = c.renewals.Create(ctx, lease, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var cur *coordinationv1.Lease
			if cur, err = c.renewals.Get(ctx, c.memberName, metav1.GetOptions{}); err == nil {
				if err = c.checkForeign(cur); err == nil {
					lease.ResourceVersion = cur.ResourceVersion
					out, err = c.renewals.Update(ctx, lease, metav1.UpdateOptions{})
				}
			}
		}
	} else {
		out, err = c.renewals.Update(ctx, lease, metav1.UpdateOptions{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			c.memberRV = "" // deleted or changed by someone else: recreate or re-read next time
		}
		return err
	}
	c.memberRV = out.ResourceVersion
	c.lastRenew = sent
	if c.deadline != nil {
		c.deadline.Reset(time.Until(sent.Add(c.opts.RenewDeadline)))
	}
	c.recomputeLocked(time.Now())
	return nil
}

// recomputeLocked updates the live peer set and this replica's own standing at
// now, signals a change, ends fences if this replica is no longer active, and
// returns when the next expiry falls due (zero if none).
func (c *Coordinator) recomputeLocked(now time.Time) time.Time {
	var next time.Time
	due := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	active := !c.lastRenew.IsZero() && now.Before(c.lastRenew.Add(c.opts.RenewDeadline))
	if active {
		due(c.lastRenew.Add(c.opts.RenewDeadline))
	}
	if active != c.active {
		c.active = active
		if !active && !c.stopping {
			c.log.Error(nil, "member Lease not renewed within RenewDeadline: giving up every cluster", "renewDeadline", c.opts.RenewDeadline, "fences", len(c.held))
			for _, f := range c.held {
				if f.ctx.Err() == nil {
					fenceEvents.WithLabelValues(c.opts.Name, eventLost).Inc()
				}
				f.cancel(ErrFenceLost)
			}
		}
		c.signalChangedLocked()
	}
	peers := []peer{{identity: c.opts.Identity, weight: c.opts.Weight}}
	for id, m := range c.members {
		if id == c.opts.Identity {
			continue
		}
		expiry := m.observedAt.Add(c.opts.LeaseDuration)
		if now.Before(expiry) {
			due(expiry)
			if !m.deleted {
				peers = append(peers, peer{identity: id, weight: m.weight})
			}
		} else if now.After(expiry.Add(staleAfter * c.opts.LeaseDuration)) {
			// Long gone: forget it, and delete the member Lease a crashed replica
			// left behind (a replica that comes back recreates its own).
			delete(c.members, id)
			if !m.deleted {
				c.stale = append(c.stale, member{identity: id, rv: m.rv})
			}
		}
	}
	slices.SortFunc(peers, func(a, b peer) int {
		if a.identity < b.identity {
			return -1
		}
		if a.identity > b.identity {
			return 1
		}
		return 0
	})
	if !slices.Equal(peers, c.peers) {
		if c.synced {
			c.log.Info("peers changed", "peers", len(peers))
		}
		c.peers = peers
		c.signalChangedLocked()
	}
	return next
}

func (c *Coordinator) signalChangedLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
	c.notifyLocked()
}

func (c *Coordinator) notifyLocked() {
	close(c.notify)
	c.notify = make(chan struct{})
}

// holderValidLocked reports whether a fence held by identity still excludes
// others at now, and until when.
func (c *Coordinator) holderValidLocked(identity string, now time.Time) (bool, time.Time) {
	if identity == "" {
		return false, time.Time{}
	}
	if identity == c.opts.Identity {
		return true, time.Time{}
	}
	m, ok := c.members[identity]
	if !ok {
		// A holder we have never seen (it left before we started, or its member
		// Lease was deleted by hand): give it a full LeaseDuration from now.
		m = &member{identity: identity, observedAt: now, deleted: true}
		c.members[identity] = m
	}
	expiry := m.observedAt.Add(c.opts.LeaseDuration)
	return now.Before(expiry), expiry
}

// newInformer watches the group's Leases (members and fences: one watch).
func (c *Coordinator) newInformer() cache.SharedIndexInformer {
	selector := labels.SelectorFromSet(labels.Set{LabelGroup: c.opts.Name}).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return c.leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return c.leases.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observe(obj, false) },
		UpdateFunc: func(_, obj any) { c.observe(obj, false) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			c.observe(obj, true)
		},
	})
	c.mu.Lock()
	c.store = inf.GetStore()
	c.mu.Unlock()
	return inf
}

// observe records a Lease event.
func (c *Coordinator) observe(obj any, deleted bool) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch lease.Labels[LabelRole] {
	case roleMember:
		id := ptr.Deref(lease.Spec.HolderIdentity, "")
		if id == "" || id == c.opts.Identity {
			return
		}
		renew := ""
		if lease.Spec.RenewTime != nil {
			renew = lease.Spec.RenewTime.UTC().String()
		}
		m, ok := c.members[id]
		if !ok {
			m = &member{identity: id, observedAt: now}
			c.members[id] = m
		}
		if deleted {
			m.deleted = true // stays a fence holder until observedAt+LeaseDuration
		} else {
			if m.deleted || renew != m.renewTime {
				m.observedAt = now
			}
			m.deleted, m.renewTime, m.rv = false, renew, lease.ResourceVersion
			m.weight = 1
			if w, err := strconv.Atoi(lease.Annotations[AnnotationWeight]); err == nil && w > 0 {
				m.weight = w
			} else if s := lease.Annotations[AnnotationWeight]; s != "" {
				c.log.Error(err, "peer's weight is not a positive integer: using 1", "peer", id, "lease", lease.Name, "weight", s)
			}
		}
		c.recomputeLocked(now)
	case roleFence:
		cluster := lease.Annotations[AnnotationCluster]
		if f, ok := c.held[cluster]; ok && f.leaseName == lease.Name {
			holder := ptr.Deref(lease.Spec.HolderIdentity, "")
			switch {
			case deleted && f.ctx.Err() == nil:
				c.log.Error(ErrFenceLost, "fence Lease deleted under this replica", "cluster", cluster, "lease", lease.Name)
				fenceEvents.WithLabelValues(c.opts.Name, eventLost).Inc()
				f.cancel(ErrFenceLost)
			case lease.ResourceVersion == f.rv:
				f.seen = true
			case f.seen && holder != c.opts.Identity && f.ctx.Err() == nil:
				c.log.Error(ErrFenceLost, "fence taken from this replica", "cluster", cluster, "holder", holder)
				fenceEvents.WithLabelValues(c.opts.Name, eventLost).Inc()
				f.cancel(ErrFenceLost)
			}
		}
	}
	c.notifyLocked()
}

// shutdown ends every fenced context, deletes the member Lease and waits up to
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
	rv := c.memberRV
	c.mu.Unlock()
	// Only our own version: never the Lease of another process with our identity.
	if rv != "" {
		err := c.leases.Delete(ctx, c.memberName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil && !apierrors.IsNotFound(err) {
			c.log.Error(err, "deleting the member Lease failed: peers take over when it expires", "lease", c.memberName)
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
