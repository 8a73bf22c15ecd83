package fleet_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// members: 0 is the host, 1 to 3 are members.
var members *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 4, func(f *fleettest.Fleet) { members = f })
}

// configProvider is the smallest built-in-style provider: it publishes
// rest.Configs as members through pkg/clusters.Members.
type configProvider struct {
	members pkgclusters.Members
	initial map[multicluster.ClusterName]*rest.Config
	started chan struct{}
}

func newConfigProvider(initial map[multicluster.ClusterName]*rest.Config) *configProvider {
	return &configProvider{initial: initial, started: make(chan struct{})}
}

func (p *configProvider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.members.Start(ctx, aware, logr.Discard())
	for name, cfg := range p.initial {
		p.set(name, cfg)
	}
	close(p.started)
	<-ctx.Done()
	p.members.Wait()
	return nil
}

func (p *configProvider) set(name multicluster.ClusterName, cfg *rest.Config) {
	sum := sha256.Sum256([]byte(cfg.Host + "|" + cfg.BearerToken + "|" + string(cfg.CertData)))
	p.members.Set(name, hex.EncodeToString(sum[:]), cfg, nil)
}

func (p *configProvider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return p.members.Get(ctx, name)
}

func (p *configProvider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return p.members.IndexField(ctx, obj, field, extract)
}

var _ multicluster.ProviderRunnable = &configProvider{}

// threeMembers creates namespace ns in members 1 to 3 and returns a provider
// of them, named m1, m2 and third; the third is reached through a proxy.
func threeMembers(t *testing.T, ns, third string) (*configProvider, *testbed.Proxy) {
	t.Helper()
	for i := 1; i <= 3; i++ {
		testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(i)), ns)
	}
	proxiedCfg, proxy := testbed.Proxied(t, members.Config(3))
	return newConfigProvider(map[multicluster.ClusterName]*rest.Config{
		"m1": members.Config(1), "m2": members.Config(2), third: proxiedCfg,
	}), proxy
}
