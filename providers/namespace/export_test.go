package namespace

import (
	"maps"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Accessors of the provider's dispatchers, for the package's tests.

// handlersFor returns the registrations of namespace ns.
func (d *dispatcher) handlersFor(ns string) []*registration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byNS[ns]
}

// namespaces returns how many namespaces have handlers.
func (d *dispatcher) namespaces() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.byNS)
}

// informers returns the number of shared informers with a namespace
// dispatcher, and the namespaces they dispatch to.
func (p *Provider) informers() map[schema.GroupVersionKind]int {
	p.dispatchers.mu.Lock()
	defer p.dispatchers.mu.Unlock()
	out := map[schema.GroupVersionKind]int{}
	for k, d := range p.dispatchers.m {
		out[k.gvk] = d.namespaces()
	}
	return out
}

// dispatcherSnapshot returns the current dispatchers.
func (p *Provider) dispatcherSnapshot() map[informerKey]*dispatcher {
	p.dispatchers.mu.Lock()
	defer p.dispatchers.mu.Unlock()
	return maps.Clone(p.dispatchers.m)
}
