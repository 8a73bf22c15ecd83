package kubeconfig_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// The settings hook sees the Secret a cluster was read from, with its labels
// and annotations but without its data, and a config without credentials:
// it never sees the kubeconfig's credentials.
func TestSettingsHookSeesTheSecretWithoutItsData(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var seen client.Object
	var token string
	hook := func(name multicluster.ClusterName, source client.Object, cfg *rest.Config) []cluster.Option {
		mu.Lock()
		defer mu.Unlock()
		if name == "hooked" {
			seen, token = source, cfg.BearerToken+string(cfg.CertData)+string(cfg.KeyData)
		}
		cfg.QPS, cfg.Burst = 50, 100
		return nil
	}
	e := startSetUp(t, nil, kubeconfig.Options{}, nil, mcmanager.WithClusterSettings(hook))
	secret := e.secret(t, "hooked", 1)
	secret.Labels["tier"] = "edge"
	if err := e.host.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, time.Minute, func() error {
		cl, err := e.mgr.GetCluster(ctx, "hooked")
		if err != nil {
			return err
		}
		if cfg := cl.GetConfig(); cfg.QPS != 50 || cfg.Burst != 100 {
			return fmt.Errorf("QPS %v, Burst %d; want the hook's 50 and 100", cfg.QPS, cfg.Burst)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	s, ok := seen.(*corev1.Secret)
	if !ok {
		t.Fatalf("the hook saw %T, want the Secret", seen)
	}
	if s.Name != "hooked" || s.Labels["tier"] != "edge" {
		t.Errorf("the hook saw %s with labels %v, want the Secret hooked labelled tier=edge", s.Name, s.Labels)
	}
	if len(s.Data) != 0 || len(s.StringData) != 0 {
		t.Error("the hook saw the Secret's data")
	}
	if token != "" {
		t.Error("the hook saw credentials in the config")
	}
}
