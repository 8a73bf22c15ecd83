package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// snippet:custom-provider-type
// Provider engages one cluster per "<name>.kubeconfig" file of a directory,
// polled every Interval. The source of truth (the directory) and the naming
// are its own; the lifecycle (build, probe, wait for the cache, engage, retry,
// replace, tear down) is the fleet engine's, reached through pkg/clusters.Members.
type Provider struct {
	pkgclusters.View // Get, IndexField, ClusterNames

	dir      string
	interval time.Duration
	policy   pkgclusters.KubeconfigPolicy
	members  pkgclusters.Members

	mu      sync.Mutex
	started bool
}

// Compile-time checks: the manager runs the provider because it is a ProviderRunnable.
var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
)

func NewProvider(dir string, interval time.Duration) *Provider {
	p := &Provider{dir: dir, interval: interval}
	p.View = p.members.View()
	return p
}

// end-snippet

// snippet:custom-provider-start
// Start follows the directory until ctx ends; the manager calls it.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return fmt.Errorf("directory provider: %w", multicluster.ErrAlreadyStarted)
	}
	p.started = true
	p.mu.Unlock()

	log := logf.FromContext(ctx).WithName("directory-provider")
	runCtx, cancel := context.WithCancel(ctx)
	defer p.members.Wait() // every per-cluster goroutine has ended when Start returns
	defer cancel()
	p.members.Start(runCtx, aware, log)

	ticker := time.NewTicker(p.interval)
	defer ticker.Stop()
	for {
		p.sync(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// end-snippet

// snippet:custom-provider-sync
// sync applies the directory to the fleet: Set for new or changed files (the
// content hash decides), Remove for files that are gone.
func (p *Provider) sync(ctx context.Context) {
	log := logf.FromContext(ctx).WithName("directory-provider")
	paths, err := filepath.Glob(filepath.Join(p.dir, "*.kubeconfig"))
	if err != nil {
		log.Error(err, "Listing kubeconfig files; keeping the fleet as it is", "dir", p.dir)
		return
	}
	seen := map[multicluster.ClusterName]bool{}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".kubeconfig")
		seen[name] = true
		data, err := os.ReadFile(path)
		if err != nil {
			log.Error(err, "Reading kubeconfig; the cluster keeps its last good configuration", "cluster", name, "file", path)
			continue
		}
		// Files may come from anyone who can write the directory: refuse exec
		// plugins and local file references.
		cfg, err := pkgclusters.RESTConfigFromUntrustedKubeconfig(data, p.policy)
		if err != nil {
			log.Error(err, "Refusing kubeconfig", "cluster", name, "file", path)
			continue
		}
		sum := sha256.Sum256(data)
		p.members.Set(name, hex.EncodeToString(sum[:]), cfg, func(err error) {
			if err != nil {
				log.Error(err, "Cluster not engaged yet", "cluster", name)
			}
		})
	}
	for _, name := range p.members.Names() {
		if !seen[name] {
			p.members.Remove(name)
		}
	}
}

// end-snippet
