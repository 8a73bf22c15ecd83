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
// manager, as the controller-driven providers do (kubeconfig, cluster-api,
// cluster-inventory-api). After SetupWithManager, the multi provider sets
// up every such inner provider, present and added later, with its manager.
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
	sp, ok := p.(ManagerSetupProvider)
	if mgr == nil || !ok {
		return nil
	}
	if err := sp.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("multi provider: prefix %q: setting up %T with the manager: %w", prefix, p, err)
	}
	return nil
}

// RunnableProvider is a provider the multi provider runs: what AsRunnable
// returns.
type RunnableProvider interface {
	multicluster.Provider
	multicluster.ProviderRunnable
}

// AsRunnable returns p as a RunnableProvider: p itself if it runs, or p with
// a Start that only waits for its context, for a provider whose clusters are
// engaged by other code (a controller-driven provider, set up with the
// manager) and which should still be registered as runnable.
func AsRunnable(p multicluster.Provider) RunnableProvider {
	if r, ok := p.(RunnableProvider); ok {
		return r
	}
	return waiting{p}
}

type waiting struct{ multicluster.Provider }

// Start waits until ctx ends: the provider engages nothing by itself.
func (waiting) Start(ctx context.Context, _ multicluster.Aware) error {
	<-ctx.Done()
	return nil
}
