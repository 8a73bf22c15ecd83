package multi

import (
	"context"
	"errors"
	"fmt"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var errChannelSize = errors.New("multi provider: Options.ChannelSize has no effect here (inner providers' clusters reach the fleet engine directly, unbuffered): leave it unset")

// ManagerSetupProvider is an inner provider that registers itself with the
// manager, as the kubeconfig provider does. After SetupWithManager, the
// multi provider sets up every such inner provider, present and added later,
// with its manager, and also those with SetupWithManagerContext(ctx, mgr) or
// upstream's SetupWithManager(mgr) (the Cluster API and
// cluster-inventory-api providers).
type ManagerSetupProvider interface {
	multicluster.Provider
	SetupWithManager(ctx context.Context, mgr mcmanager.Manager) error
}

// SetupWithManager sets up with mgr every inner ManagerSetupProvider
// registered so far, and each one AddProvider registers later, so that a
// program does not call their SetupWithManager itself. mgr must run the
// multi provider (pass it to mcmanager.New). Calling it twice fails.
func (m *Provider) SetupWithManager(ctx context.Context, mgr mcmanager.Manager) error {
	if mgr == nil {
		return errors.New("multi provider: nil manager")
	}
	m.mu.Lock()
	if m.mgr != nil {
		m.mu.Unlock()
		return errors.New("multi provider: SetupWithManager was called already")
	}
	m.mgr = mgr
	present := map[string]multicluster.Provider{}
	for prefix, ip := range m.providers {
		present[prefix] = ip.provider
	}
	m.mu.Unlock()
	var errs []error
	for prefix, p := range present {
		errs = append(errs, m.setUp(ctx, prefix, p))
	}
	return errors.Join(errs...)
}

// setUp sets p up with the manager of SetupWithManager, if p needs it and
// SetupWithManager was called.
func (m *Provider) setUp(ctx context.Context, prefix string, p multicluster.Provider) error {
	m.mu.Lock()
	mgr := m.mgr
	m.mu.Unlock()
	if mgr == nil {
		return nil
	}
	if err := setUpWith(ctx, p, mgr); err != nil {
		return fmt.Errorf("multi provider: prefix %q: setting up %T with the manager: %w", prefix, p, err)
	}
	return nil
}

// setUpWith sets p up with mgr if p is set up with a manager: a
// ManagerSetupProvider, or a provider with upstream's SetupWithManager(mgr)
// and SetupWithManagerContext(ctx, mgr) (the Cluster API and
// cluster-inventory-api providers). Other providers are left alone.
func setUpWith(ctx context.Context, p multicluster.Provider, mgr mcmanager.Manager) error {
	switch sp := p.(type) {
	case ManagerSetupProvider:
		return sp.SetupWithManager(ctx, mgr)
	case interface {
		SetupWithManagerContext(context.Context, mcmanager.Manager) error
	}:
		return sp.SetupWithManagerContext(ctx, mgr)
	case interface {
		SetupWithManager(mcmanager.Manager) error
	}:
		return sp.SetupWithManager(mgr)
	}
	return nil
}

// RunnableProvider is a provider the multi provider runs: what AsRunnable
// returns.
type RunnableProvider interface {
	multicluster.Provider
	multicluster.ProviderRunnable
}

// AsRunnable returns p as a RunnableProvider, in upstream's shape: p itself
// if it runs; otherwise p with a Start that, if mgr is not nil and p is a
// ManagerSetupProvider (a controller-driven provider), sets p up with mgr and
// then waits for its context. A provider whose clusters are engaged by other
// code is so registered as runnable; pass a nil mgr for one that is set up
// already (or through the multi provider's SetupWithManager).
func AsRunnable(p multicluster.Provider, mgr mcmanager.Manager) RunnableProvider {
	if r, ok := p.(RunnableProvider); ok {
		return r
	}
	return waiting{Provider: p, mgr: mgr}
}

type waiting struct {
	multicluster.Provider
	mgr mcmanager.Manager
}

// Start sets the provider up with the manager AsRunnable was given, if any
// and it needs it, and waits until ctx ends: the provider engages nothing by
// itself.
func (w waiting) Start(ctx context.Context, _ multicluster.Aware) error {
	if w.mgr != nil {
		if err := setUpWith(ctx, w.Provider, w.mgr); err != nil {
			return fmt.Errorf("multi provider: setting up %T with the manager: %w", w.Provider, err)
		}
	}
	<-ctx.Done()
	return nil
}
