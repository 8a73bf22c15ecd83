package file

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// RunOnce reads the kubeconfig files once, hands their clusters to aware (the
// manager, which engages them as Start's), and returns without waiting for
// them: the files are not watched, so later changes to them change nothing.
// The clusters run until ctx ends. It is Start for a program that
// reads its fleet once (a one-shot job); a provider runs either RunOnce or
// Start, once.
func (p *Provider) RunOnce(ctx context.Context, aware multicluster.Aware) error {
	log, err := p.begin(ctx)
	if err != nil {
		return err
	}
	p.members.Start(ctx, aware, log)
	p.read(log)
	close(p.listed)
	return nil
}

// begin marks the provider started (Start or RunOnce, once) and returns its
// logger.
func (p *Provider) begin(ctx context.Context) (logr.Logger, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return logr.Logger{}, fmt.Errorf("file provider: %w", multicluster.ErrAlreadyStarted)
	}
	p.started = true
	return logf.FromContext(ctx).WithName("file-provider"), nil
}
