package clusterinventoryapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/kubeconfigstrategy"
)

// The upstream design's KubeconfigStrategyOption sets the access providers;
// what cannot be honoured is refused by New, saying what to use.
func TestKubeconfigStrategyOption(t *testing.T) {
	ap := pluginProvider(t, "plugin")
	if _, err := clusterinventoryapi.New(clusterinventoryapi.Options{
		KubeconfigStrategyOption: kubeconfigstrategy.FromAccessProviders(ap),
	}); err != nil {
		t.Fatalf("New with the access providers in KubeconfigStrategyOption: %v", err)
	}
	for name, tc := range map[string]struct {
		opts clusterinventoryapi.Options
		want string
	}{
		"both": {clusterinventoryapi.Options{AccessProviders: []clusterinventoryapi.AccessProvider{ap},
			KubeconfigStrategyOption: kubeconfigstrategy.FromAccessProviders(ap)}, "set one"},
		"neither": {clusterinventoryapi.Options{}, ""},
		"NewCluster": {clusterinventoryapi.Options{AccessProviders: []clusterinventoryapi.AccessProvider{ap},
			NewCluster: func(context.Context, *v1alpha1.ClusterProfile, *rest.Config, ...cluster.Option) (cluster.Cluster, error) {
				return nil, errors.New("unused")
			}}, "configure them with Options.ClusterOptions"},
	} {
		_, err := clusterinventoryapi.New(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error saying %q", name, err, tc.want)
		}
	}
}
