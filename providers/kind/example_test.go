package kind_test

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/providers/kind"
)

// New engages the local kind clusters whose name starts with "fleet-"; the
// Multi-Cluster Manager runs the provider.
func ExampleNew() {
	provider := kind.New(kind.Options{Prefix: "fleet-", Interval: 2 * time.Second})
	fmt.Println(len(provider.ClusterNames()), kind.DefaultInterval) // nothing engaged before the manager starts

	setup := func(hostConfig *rest.Config) (mcmanager.Manager, error) {
		return mcmanager.New(hostConfig, provider, mcmanager.Options{})
	}
	_ = setup
	// Output: 0 5s
}
