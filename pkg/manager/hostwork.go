package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
)

// HostOwner is implemented by the Multi-Cluster Manager: it tells the
// components that serve the host's own work when this replica does it.
// Without sharding a replica always does (its tenure is the manager's run);
// under sharding exactly one replica does at a time, the owner of
// sharding.HostKey, which holds the host's fence for as long as its tenure
// lasts (see WithSharding).
type HostOwner interface {
	// OnHostTenure calls begin, on a goroutine of its own, with the context
	// of every tenure of this replica over the host's work, the current one
	// included: it ends when this replica gives the host up (hand-off, fence
	// lost, manager stopping). begin must not block. Without sharding it
	// returns false and never calls begin: the host's work is this
	// replica's for as long as it runs.
	OnHostTenure(begin func(tenure context.Context)) bool
	// HoldHost marks a piece of host work in flight (a reconcile of a host
	// request): the host's fence is not released before done is called
	// (bounded by the drain of WithSharding). ok is false if this replica
	// does not run the host's work now; without sharding it is always true.
	HoldHost() (tenure context.Context, done func(), ok bool)
}

var _ HostOwner = &mcManager{}

// hostOwnedGauge is 1 while this replica runs the host's work under sharding.
var hostOwnedGauge = metrics.NewGaugeVec("multicluster_sharding_host_owned",
	"1 while this replica runs the host's work (the runnables that need leader election, host-owner-only controllers) under sharding, 0 otherwise.")

// hostAdmission is what the host's work needs of sharding: the coordinator's
// assignment and fence, the same a member's admission uses.
type hostAdmission interface {
	fleet.Admission
	MaxDrain() time.Duration
	Census(names []string) sharding.Census
	ReportOwnership(ctx context.Context, names func() []string)
	Identity() string
	Owner(name string) string
	Peers() []string
}

var _ hostAdmission = &sharding.Coordinator{}

// hostWork runs the host's work on the replica that owns sharding.HostKey: it
// waits until the coordinator assigns it the host, takes the host's fence
// (Acquire, as the engine does for a member), starts the runnables that need
// leader election and the tenures of host-owner-only controllers, and when
// the host is assigned elsewhere, its fence is lost or the manager stops, it
// stops them, waits for them to return and for the host work in flight
// (HoldHost) — bounded by the coordinator's MaxDrain, overruns logged and
// counted in multicluster_drain_overruns_total — and only then releases the
// fence. No second election: the host is one more key of the same Leases.
type hostWork struct {
	adm hostAdmission
	log logr.Logger

	mu        sync.Mutex
	runnables []manager.Runnable
	subs      []func(context.Context)
	cur       *tenure // nil while this replica does not run the host's work
	errs      chan error
}

// tenure is one period of this replica over the host's work.
type tenure struct {
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup // runnables started in this tenure
	holds   int            // HoldHost in flight, under hostWork.mu
	drained chan struct{}  // closed when holds reaches 0 after the end
}

func newHostWork(adm hostAdmission, log logr.Logger) *hostWork {
	return &hostWork{adm: adm, log: log, errs: make(chan error, 1)}
}

// NeedLeaderElection is false: it runs on every replica and decides itself.
func (w *hostWork) NeedLeaderElection() bool { return false }

// add gates a runnable: it runs during each tenure of this replica, started
// at once if one runs now.
func (w *hostWork) add(r manager.Runnable) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runnables = append(w.runnables, r)
	if w.cur != nil {
		w.startLocked(w.cur, r)
	}
}

// OnHostTenure implements HostOwner.
func (w *hostWork) OnHostTenure(begin func(context.Context)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs = append(w.subs, begin)
	if w.cur != nil {
		go begin(w.cur.ctx)
	}
}

// HoldHost implements HostOwner.
func (w *hostWork) HoldHost() (context.Context, func(), bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.cur
	if t == nil || t.ctx.Err() != nil {
		return nil, nil, false
	}
	t.holds++
	var once sync.Once
	return t.ctx, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if t.holds--; t.holds == 0 && t.drained != nil {
				close(t.drained)
			}
		})
	}, true
}

// startLocked starts r within t. A runnable that fails while the tenure
// lasts fails the manager, as it would in controller-runtime's leader
// election group; among such failures is a controller-runtime controller
// started in a second tenure of one process (it starts only once).
func (w *hostWork) startLocked(t *tenure, r manager.Runnable) {
	t.running.Add(1)
	go func() {
		defer t.running.Done()
		err := r.Start(t.ctx)
		switch {
		case err == nil || errors.Is(err, context.Canceled):
		case t.ctx.Err() != nil:
			w.log.Error(err, "Host work returned an error when this replica gave the host up", "runnable", fmt.Sprintf("%T", r))
		default:
			select {
			case w.errs <- fmt.Errorf("host work %T: %w", r, err):
			default:
			}
		}
	}()
}

// Start serves the host's work whenever this replica owns it, until ctx ends.
func (w *hostWork) Start(ctx context.Context) error {
	backoff := time.Duration(0)
	for {
		if !w.waitOwned(ctx) {
			return nil
		}
		fenced, release, err := w.acquire(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(max(2*backoff, time.Second), 30*time.Second)
			w.log.Error(err, "Failed to acquire the host's fence, retrying", "retryIn", backoff.String())
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if fenced == nil {
			continue // the host was assigned elsewhere while we waited for its fence
		}
		t := w.begin(fenced)
		why, failed := w.serve(ctx, t)
		w.end(t, why, release)
		if failed != nil {
			return failed
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// waitOwned returns once the coordinator assigns the host to this replica;
// false if ctx ended first.
func (w *hostWork) waitOwned(ctx context.Context) bool {
	for {
		changed := w.adm.Changed()
		if w.adm.Owns(sharding.HostKey) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

// acquire waits for the host's fence while the host stays assigned here. It
// returns a nil fence (and no error) if the host was assigned elsewhere
// first.
func (w *hostWork) acquire(ctx context.Context) (context.Context, func(), error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errAssignedElsewhere := errors.New("the host was assigned to another replica")
	go func() {
		for {
			changed := w.adm.Changed()
			if !w.adm.Owns(sharding.HostKey) {
				cancel(errAssignedElsewhere)
				return
			}
			select {
			case <-actx.Done():
				return
			case <-changed:
			}
		}
	}()
	fenced, release, err := w.adm.Acquire(actx, sharding.HostKey)
	if err != nil {
		if errors.Is(context.Cause(actx), errAssignedElsewhere) && ctx.Err() == nil {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	if !w.adm.Owns(sharding.HostKey) {
		release()
		return nil, nil, nil
	}
	return fenced, release, nil
}

// begin starts a tenure within the fence: the gated runnables and the
// subscribers' tenures.
func (w *hostWork) begin(fenced context.Context) *tenure {
	ctx, cancel := context.WithCancel(fenced)
	t := &tenure{ctx: ctx, cancel: cancel}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cur = t
	for _, r := range w.runnables {
		w.startLocked(t, r)
	}
	for _, begin := range w.subs {
		go begin(ctx)
	}
	hostOwnedGauge.WithLabelValues().Set(1)
	w.log.Info("This replica runs the host's work", "runnables", len(w.runnables), "hostOwnerOnlyControllers", len(w.subs))
	return t
}

// serve waits until the tenure must end, and says why; failed is a runnable's
// error, which ends the manager.
func (w *hostWork) serve(ctx context.Context, t *tenure) (why string, failed error) {
	for {
		changed := w.adm.Changed()
		if !w.adm.Owns(sharding.HostKey) {
			return "the host is assigned to another replica", nil
		}
		select {
		case <-ctx.Done():
			return "the manager is stopping", nil
		case <-t.ctx.Done():
			return fmt.Sprintf("the host's fence ended: %v", context.Cause(t.ctx)), nil
		case err := <-w.errs:
			return "host work failed", err
		case <-changed:
		}
	}
}

// end stops the tenure's work, drains it and releases the host's fence: the
// next owner starts only after this replica's host work has returned.
func (w *hostWork) end(t *tenure, why string, release func()) {
	w.mu.Lock()
	w.cur = nil
	t.cancel()
	if t.holds > 0 {
		t.drained = make(chan struct{})
	}
	drained := t.drained
	w.mu.Unlock()
	hostOwnedGauge.WithLabelValues().Set(0)

	bound := w.adm.MaxDrain()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	stopped := make(chan struct{})
	go func() { t.running.Wait(); close(stopped) }()
	for _, ch := range []<-chan struct{}{stopped, drained} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-timer.C:
			metrics.DrainOverruns.Inc()
			w.log.Error(fmt.Errorf("host work still running after %s", bound),
				"Releasing the host's fence although host work has not returned")
			release()
			return
		}
	}
	release()
	w.log.Info("This replica gave the host's work up", "reason", why)
}

// needsLeaderElection tells the runnables controller-runtime's manager would
// start only once elected (its leader election group) from the others, by
// the same rules: HTTP servers that ask for it, runnables that say so through
// manager.LeaderElectionRunnable, and runnables that say nothing; never
// caches and webhook servers.
func needsLeaderElection(r manager.Runnable) bool {
	switch r := r.(type) {
	case *manager.Server:
		return r.NeedLeaderElection()
	case interface{ GetCache() cache.Cache }:
		return false
	case webhook.Server:
		return false
	case manager.LeaderElectionRunnable:
		return r.NeedLeaderElection()
	}
	return true
}

// hostManager is the host manager as GetLocalManager returns it under
// sharding: runnables added to it that need leader election (a plain
// controller-runtime controller built on it, a RunnableFunc) run on the
// host's owner alone, like those added through the Multi-Cluster Manager.
type hostManager struct {
	manager.Manager
	host *hostWork
}

func (h *hostManager) Add(r manager.Runnable) error {
	if needsLeaderElection(r) {
		h.host.add(r)
		return nil
	}
	return h.Manager.Add(r)
}

// ownershipReporter runs the coordinator's census of the clusters the engine
// knows and of the host.
type ownershipReporter struct {
	adm   hostAdmission
	fleet *fleet.Engine
}

func (o *ownershipReporter) NeedLeaderElection() bool { return false }

func (o *ownershipReporter) Start(ctx context.Context) error {
	o.adm.ReportOwnership(ctx, func() []string {
		statuses := o.fleet.Clusters()
		names := make([]string, 0, len(statuses)+1)
		names = append(names, sharding.HostKey)
		for _, s := range statuses {
			names = append(names, s.Name)
		}
		return names
	})
	return nil
}

// setupHostWork wires the host's work and the census to the coordinator.
// Called under sharding only: without it, every runnable runs where
// controller-runtime's manager runs it.
func (m *mcManager) setupHostWork(adm fleet.Admission) error {
	ha, ok := adm.(hostAdmission)
	if !ok {
		return fmt.Errorf("the sharding admission %T cannot fence the host's work", adm)
	}
	m.host = newHostWork(ha, m.Manager.GetLogger().WithName("host-work"))
	m.adm = ha
	m.local = &hostManager{Manager: m.Manager, host: m.host}
	if err := m.Manager.Add(m.host); err != nil {
		return fmt.Errorf("adding the host's work: %w", err)
	}
	if err := m.Manager.Add(&ownershipReporter{adm: ha, fleet: m.fleet}); err != nil {
		return fmt.Errorf("adding the ownership census: %w", err)
	}
	return nil
}

// OnHostTenure implements HostOwner. Without sharding it returns false and
// never calls begin: the host's work is this replica's for as long as it runs.
func (m *mcManager) OnHostTenure(begin func(context.Context)) bool {
	if m.host == nil {
		return false
	}
	m.host.OnHostTenure(begin)
	return true
}

// HoldHost implements HostOwner; without sharding the host's work is always
// this replica's.
func (m *mcManager) HoldHost() (context.Context, func(), bool) {
	if m.host == nil {
		return context.Background(), func() {}, true
	}
	return m.host.HoldHost()
}

// Assignment returns who runs which cluster, for the components that
// combine the replicas' work (fleetreader.Aggregate): under sharding the
// coordinator's assignment; nil without sharding (one replica runs all).
func (m *mcManager) Assignment() fleetreader.Assignment {
	if m.adm == nil {
		return nil
	}
	return m.adm
}

// localManager is the host manager as users see it: under sharding, one
// whose leader-election runnables run on the host's owner alone.
func (m *mcManager) localManager() manager.Manager {
	if m.local == nil {
		return m.Manager
	}
	return m.local
}
