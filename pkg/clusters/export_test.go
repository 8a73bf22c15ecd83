package clusters

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SetMinRefresh shortens how often the lazy mapper looks again, for tests.
func SetMinRefresh(d time.Duration) (restore func()) {
	old := minRefresh
	minRefresh = d
	return func() { minRefresh = old }
}

// SetDiscoveryTimeout shortens the lazy mapper's request timeout, for tests.
func SetDiscoveryTimeout(d time.Duration) (restore func()) {
	old := discoveryTimeout
	discoveryTimeout = d
	return func() { discoveryTimeout = old }
}

// LoadedGroupVersions returns what a lazy mapper has fetched, for tests.
func LoadedGroupVersions(m meta.RESTMapper) []schema.GroupVersion {
	lm := m.(*lazyMapper)
	lm.mu.Lock()
	defer lm.mu.Unlock()
	var out []schema.GroupVersion
	for gv := range lm.loaded {
		out = append(out, gv)
	}
	return out
}
