package build

import (
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/internal/fleetpeek"
)

// The library's own tests look into the clusters built here through
// fleetpeek (internal: not part of the API).
func init() {
	fleetpeek.ConnGatesTo = func(host string) int {
		connGates.Lock()
		defer connGates.Unlock()
		n := 0
		for key := range connGates.m {
			if key.host == host {
				n++
			}
		}
		return n
	}
	fleetpeek.SetMinRefresh = func(d time.Duration) (restore func()) {
		old := minRefresh
		minRefresh = d
		return func() { minRefresh = old }
	}
	fleetpeek.MapperSharesConnections = func(c any) bool {
		cl := c.(*lightCluster)
		lm := cl.GetRESTMapper().(*lazyMapper)
		hc := lm.discovery.(*discovery.DiscoveryClient).RESTClient().(*rest.RESTClient).Client
		return hc.Transport == cl.httpClient.Transport
	}
}
