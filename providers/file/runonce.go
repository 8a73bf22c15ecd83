package file

import (
	"context"
	"fmt"

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
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return fmt.Errorf("file provider: %w", multicluster.ErrAlreadyStarted)
	}
	p.started = true
	p.mu.Unlock()

	log := logf.FromContext(ctx).WithName("file-provider")
	p.members.Start(ctx, aware, log)
	p.read(log)
	close(p.listed)
	return nil
}
