package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Every cluster enters the engine the same way: as a member with a Build.
// What the application or a provider already runs — a pre-built cluster
// (Member.Cluster), a cluster handed to Engage — is adapted here, at the
// door: its Build lends the engine the cluster (borrowed), whose start says
// how the engine's run of it ends. The engine then admits, fences, starts,
// probes, drains, hands off and tears down every member by the same code.

// borrowed is a cluster the engine did not build, as its Build lends it:
// the engine hands subscribers the Cluster itself and runs none of it in its
// instances, which come and go (a disconnection, a hand-off to another
// replica, a fence lost) without stopping it.
type borrowed struct {
	cluster.Cluster
	// begin, if set, starts the lent cluster unless it runs already, with
	// spawn (the engine's, so that its shutdown waits for the cluster); the
	// engine calls it once the instance is on the record's books.
	begin func(spawn func(func()))
	// dead, if set, ends when the lent cluster stops; its cause is
	// errLifeEnded if the engine stopped it, as its member left the engine.
	dead context.Context
	// synced: its provider started and synced it, so the engine does not
	// wait for its cache.
	synced bool
}

// errLifeEnded is why the engine stops a pre-built cluster it started: its
// member was removed or replaced, or the engine stopped.
var errLifeEnded = errors.New("its member was removed or replaced, or the engine stopped")

// lifeLocked returns m's life in the engine, beginning one within parent
// if it has none (or its last one ended). It ends when m is removed or
// replaced, or the engine stops; when m leaves this replica only if the
// engine builds its clusters (a Build in flight for this replica ends
// then), never for a lent cluster, which runs within it.
func lifeLocked(m *Member, parent context.Context) context.Context {
	if m.life == nil || m.life.Err() != nil {
		m.life, m.endLife = context.WithCancel(parent)
	}
	return m.life
}

// endLife ends m's life in the engine, if it has one.
func endLife(m *Member) {
	if m != nil && m.endLife != nil {
		m.endLife()
	}
}

// lent reports whether m's cluster is one the engine did not build: a
// pre-built cluster, or one handed to Engage.
func (m *Member) lent() bool { return m.Cluster != nil }

// stopOwner unties an adopted member from its provider's context.
func (m *Member) stopOwner() {
	if m != nil && m.unown != nil {
		m.unown()
	}
}

// prebuilt adapts a pre-built cluster (Member.Cluster): the engine did not
// build it, so it never stops it while its member is wanted. It is started
// once (a cache cannot start twice), when the engine first runs an instance
// of the member, unless the application runs it already, and runs within
// the member's life: through disconnections, hand-offs to other replicas
// and fences lost, so that it is engaged again when the member comes back,
// until the member is removed or replaced (or the engine stops). Its cache
// keeps running meanwhile, where the member is not owned (see the package
// documentation). The one goroutine that runs it is the cluster's own. Once
// stopped on its own, it cannot be started again: attempts fail saying so
// until its provider publishes a new one.
func prebuilt(cl cluster.Cluster) func(ctx context.Context) (cluster.Cluster, error) {
	var once sync.Once
	dead, markDead := context.WithCancelCause(context.Background())
	return func(life context.Context) (cluster.Cluster, error) {
		if dead.Err() != nil {
			return nil, fmt.Errorf("its cache stopped (%w), and a pre-built cluster cannot be started again: its provider must publish a new one", context.Cause(dead))
		}
		begin := func(spawn func(func())) {
			once.Do(func() {
				spawn(func() {
					err := cl.Start(life)
					switch {
					case AlreadyStarted(err):
						// The application runs it: it runs for the engine as
						// long as the member's life, with no goroutine of ours.
						context.AfterFunc(life, func() { markDead(errLifeEnded) })
					case life.Err() != nil:
						markDead(errLifeEnded)
					case err == nil:
						markDead(errors.New("its Start returned"))
					default:
						markDead(err)
					}
				})
			})
		}
		return &borrowed{Cluster: cl, begin: begin, dead: dead}, nil
	}
}

// Engage adopts a cluster that its provider started and synced: the way in
// of providers written as the seeds describe. At the door it becomes a member
// whose Build lends the cluster as it is (the engine neither starts nor stops
// it): admitted, fenced, probed, handed off and torn down by the same code as
// every member. ctx is the provider's: when it ends, the member is removed.
//
// Engage returns once the cluster is engaged with every subscriber. If a
// subscriber refuses, every subscriber lets go of the cluster, the member is
// removed and the error is returned (all or nothing). Before the engine runs,
// or while sharding assigns the cluster to another replica, Engage returns at
// once: the member waits, and is engaged when this replica may run it.
//
// Engaging the same instance again, under the same or a new ctx, keeps the
// engagement and ties it to the new ctx; a different instance replaces the
// engaged one once it is engaged.
func (e *Engine) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if err := ctx.Err(); err != nil {
		return multicluster.WithCluster(name, fmt.Errorf("engagement context already done: %w", err))
	}
	e.mu.Lock()
	rec := e.records.getOrAdd(name)
	m := rec.member
	if m != nil && !m.adopted {
		e.mu.Unlock()
		return multicluster.WithCluster(name, errors.New("already a member published by a provider; a name has one source"))
	}
	if m == nil || m.Cluster != cl {
		e.adopted++
		m = &Member{Name: name, Hash: fmt.Sprintf("adopted-%d", e.adopted), Cluster: cl, adopted: true, Build: lend(cl)}
		e.setMemberLocked(rec, m, "engaged by its provider")
	}
	m.stopOwner()
	m.owner = ctx
	m.unown = context.AfterFunc(ctx, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if rec.member == m && m.owner == ctx {
			e.setMemberLocked(rec, nil, "provider-stopped")
		}
	})
	done := make(chan error, 1)
	if !e.awaitLocked(rec, m, done) {
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()

	select {
	case err := <-done:
		if err != nil {
			// All or nothing: the provider hears of the refusal; the cluster leaves.
			e.mu.Lock()
			if rec.member == m {
				e.setMemberLocked(rec, nil, "engagement refused")
			}
			e.mu.Unlock()
		}
		return err
	case <-ctx.Done():
		return multicluster.WithCluster(name, fmt.Errorf("engagement context ended while engaging: %w", ctx.Err()))
	}
}

// awaitLocked has done answered with m's outcome on this replica (see
// Member.Outcome), and reports whether it waits: it does not if m is engaged
// or this replica does not run it now, which is the outcome, nil.
func (e *Engine) awaitLocked(rec *record, m *Member, done chan<- error) bool {
	if (rec.cur != nil && rec.cur.member == m && rec.state == StateEngaged) || !e.mayRunLocked(rec, m) {
		return false
	}
	rec.waiters = append(rec.waiters, &waiter{m: m, done: done})
	return true
}

// outcomeLocked has outcome, if set, answered with m's (see Member.Outcome).
func (e *Engine) outcomeLocked(rec *record, m *Member, outcome chan<- error) {
	if outcome != nil && !e.awaitLocked(rec, m, outcome) {
		answer(outcome, nil)
	}
}

// ignore logs a member SetMember refuses, and answers its Outcome.
func (e *Engine) ignore(m Member, why error) {
	e.log.Error(why, "Ignoring member", "cluster", m.Name)
	if m.Outcome != nil {
		answer(m.Outcome, multicluster.WithCluster(m.Name, fmt.Errorf("ignored: %w", why)))
	}
}

// answer sends err on done unless done is full: the engine never blocks on
// a waiter.
func answer(done chan<- error, err error) {
	select {
	case done <- err:
	default:
	}
}

// lend is the Build of an adopted cluster: its provider started and synced
// it and runs it; each of the engine's instances of it lasts until the
// engine lets go of it.
func lend(cl cluster.Cluster) func(context.Context) (cluster.Cluster, error) {
	return func(context.Context) (cluster.Cluster, error) {
		return &borrowed{Cluster: cl, synced: true}, nil
	}
}
