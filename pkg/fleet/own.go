package fleet

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Door is where a provider hands its clusters: members it publishes, and
// clusters it runs itself and engages (which the door adopts). The
// Multi-Cluster Manager is one; Own makes one for any other Aware.
type Door interface {
	multicluster.Aware
	Publisher
}

// DoorFor returns aware if it is a Door (the Multi-Cluster Manager, or a
// wrapper of it), else an engine of its own for aware (Own). Every part of
// the library that is handed an Aware and publishes members (Members,
// Clusters[T], the multi provider) asks here, so that one adapter stands
// between them and an Aware that is not the manager.
func DoorFor(aware multicluster.Aware, opts Options) Door {
	if d, ok := aware.(Door); ok {
		return d
	}
	return Own(aware, opts)
}

// OwnEngine is a fleet engine of its own for an Aware that is not the
// manager (a test's tracker, a program that drives controllers itself): it
// builds, starts, engages with that Aware, probes and tears down members as
// the manager's engine does. It runs while it has members: the first
// publication starts an engine, which stops once its last member has been
// removed and torn down, so that whoever holds the door keeps no lifecycle
// of its own; Wait waits for every engine it ran.
type OwnEngine struct {
	aware multicluster.Aware
	opts  Options

	mu      sync.Mutex
	cur     *Engine // nil while none runs
	stop    context.CancelFunc
	pending int // Engage calls between taking cur and their record
	wg      sync.WaitGroup
}

var _ Door = &OwnEngine{}

// Own returns an engine of its own for aware, with opts.
func Own(aware multicluster.Aware, opts Options) *OwnEngine {
	return &OwnEngine{aware: aware, opts: opts}
}

// engineLocked returns the running engine, starting one if none runs.
func (o *OwnEngine) engineLocked() *Engine {
	if o.cur != nil {
		return o.cur
	}
	e := New(o.opts)
	e.Subscribe(o.aware)
	// Called under e.mu: the check takes o.mu, so it runs on its own.
	e.idle = func() { o.wg.Go(func() { o.retire(e) }) }
	ctx, cancel := context.WithCancel(context.Background())
	changed, err := e.begin(ctx)
	if err != nil {
		panic(err) // a new engine has not begun: cannot happen
	}
	o.wg.Go(func() { e.run(ctx, changed) })
	o.cur, o.stop = e, cancel
	return e
}

// retire stops e if it is the running engine and has no member left; a
// publication since then keeps it.
func (o *OwnEngine) retire(e *Engine) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur != e || o.pending > 0 || e.records.len() > 0 {
		return
	}
	o.cur = nil
	o.stop()
}

// SetMember publishes m to the running engine, starting one if none runs.
func (o *OwnEngine) SetMember(m Member) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.engineLocked().SetMember(m)
}

// RemoveMember removes name from the running engine, if any.
func (o *OwnEngine) RemoveMember(name multicluster.ClusterName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur != nil {
		o.cur.RemoveMember(name)
	}
}

// Lookup returns the engaged cluster of name.
func (o *OwnEngine) Lookup(name multicluster.ClusterName) (cluster.Cluster, bool) {
	o.mu.Lock()
	e := o.cur
	o.mu.Unlock()
	if e == nil {
		return nil, false
	}
	return e.Lookup(name)
}

// Engage adopts cl under name, as Engine.Engage does.
func (o *OwnEngine) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	o.mu.Lock()
	e := o.engineLocked()
	o.pending++
	o.mu.Unlock()
	err := e.Engage(ctx, name, cl)
	o.mu.Lock()
	o.pending--
	o.mu.Unlock()
	o.retire(e) // refused: its record may have been the last
	return err
}

// Wait waits for every engine o ran to stop: remove every member first.
func (o *OwnEngine) Wait() { o.wg.Wait() }
