package fleetreader_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// members: 0 is the host, 1 and 2 are members.
var members *fleettest.Fleet

func TestMain(m *testing.M) {
	// controller-runtime's metadata-only informers wrap their watch in
	// apimachinery's watch.Filter, whose goroutine blocks for ever on a send
	// once the informer stopped reading (filter.go has no stop path): an
	// upstream leak of every stopped metadata informer, not one of ours.
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 3, func(f *fleettest.Fleet) { members = f },
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"))
}

// configProvider publishes rest.Configs as members; the test adds and
// removes them while the manager runs.
type configProvider struct {
	members pkgclusters.Members
	mu      sync.Mutex
	pending map[multicluster.ClusterName]*rest.Config
	running bool
}

func newConfigProvider(initial map[multicluster.ClusterName]*rest.Config) *configProvider {
	return &configProvider{pending: initial}
}

func (p *configProvider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.members.Start(ctx, aware, logr.Discard())
	p.mu.Lock()
	p.running = true
	for name, cfg := range p.pending {
		p.set(name, cfg)
	}
	p.mu.Unlock()
	<-ctx.Done()
	p.members.Wait()
	return nil
}

func (p *configProvider) set(name multicluster.ClusterName, cfg *rest.Config) {
	sum := sha256.Sum256([]byte(cfg.Host))
	p.members.Set(name, hex.EncodeToString(sum[:]), cfg, nil)
}

func (p *configProvider) remove(name multicluster.ClusterName) { p.members.Remove(name) }

func (p *configProvider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return p.members.Get(ctx, name)
}

func (p *configProvider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return p.members.IndexField(ctx, obj, field, extract)
}

var _ multicluster.ProviderRunnable = &configProvider{}
