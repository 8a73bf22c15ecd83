package build

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// minRefresh is how often a group version may be fetched again because a
// kind or resource was not found in it (a CRD that was just installed).
var minRefresh = 5 * time.Second

// discoveryTimeout bounds one discovery request of the lazy mapper (one
// that times out is sent once more, see retryTimedOut).
var discoveryTimeout = 30 * time.Second

// NewLazyRESTMapper returns a REST mapper that fetches discovery data one
// group version at a time, when a mapping in it is first asked for.
//
// controller-runtime's mapper loads the server's complete aggregated
// discovery document at the first lookup: every resource of every group,
// about 230 KB per cluster on a plain kube-apiserver, most of which a
// controller never uses. This one holds the group list and the group
// versions actually used (a few KB for a controller of core types). Unknown
// kinds are looked up again, at most every few seconds per group version, so
// CRDs installed later are found.
func NewLazyRESTMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	return newLazyMapper(cfg, httpClient)
}

func newLazyMapper(cfg *rest.Config, httpClient *http.Client) (*lazyMapper, error) {
	// Lookups do not take a context: bound them, so that a server that
	// accepts connections and never answers cannot hold a caller forever.
	// The copy shares the transport, and with it the connections.
	bounded := *httpClient
	if bounded.Timeout == 0 {
		bounded.Timeout = discoveryTimeout
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, &bounded)
	if err != nil {
		return nil, err
	}
	// The plain group list: the aggregated one carries every resource.
	dc.UseLegacyDiscovery = true
	return &lazyMapper{
		discovery: dc,
		mapper:    meta.NewDefaultRESTMapper(nil),
		loaded:    map[schema.GroupVersion]time.Time{},
		refresh:   minRefresh,
	}, nil
}

type lazyMapper struct {
	discovery discovery.DiscoveryInterface
	refresh   time.Duration // minRefresh when built

	mu       sync.Mutex
	groups   map[string]metav1.APIGroup // by name; nil until first needed
	groupsAt time.Time
	loaded   map[schema.GroupVersion]time.Time // group versions in mapper, and when
	mapper   *meta.DefaultRESTMapper
	loads    singleflight.Group // loads of group versions in flight, by name
}

var _ meta.RESTMapper = &lazyMapper{}

// versionsOf returns the versions to look in for group: the ones asked for,
// or the server's preferred version of the group.
func (m *lazyMapper) versionsOf(group string, versions []string) ([]string, error) {
	var asked []string
	for _, v := range versions {
		if v != "" {
			asked = append(asked, v)
		}
	}
	if len(asked) > 0 {
		return asked, nil
	}
	g, err := m.group(group)
	if err != nil {
		return nil, err
	}
	if g.PreferredVersion.Version != "" {
		return []string{g.PreferredVersion.Version}, nil
	}
	for _, v := range g.Versions {
		asked = append(asked, v.Version)
	}
	return asked, nil
}

// group returns the server's description of a group, fetching the group list
// when it is not known (again at most every minRefresh).
func (m *lazyMapper) group(name string) (metav1.APIGroup, error) {
	m.mu.Lock()
	g, ok := m.groups[name]
	stale := m.groups == nil || (!ok && time.Since(m.groupsAt) > m.refresh)
	m.mu.Unlock()
	if ok || !stale {
		if !ok {
			return g, &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: name}}
		}
		return g, nil
	}
	list, err := retryTimedOut(m.discovery.ServerGroups)
	if err != nil {
		return g, fmt.Errorf("failed to get server groups: %w", err)
	}
	groups := make(map[string]metav1.APIGroup, len(list.Groups))
	for _, g := range list.Groups {
		groups[g.Name] = g
	}
	m.mu.Lock()
	m.groups, m.groupsAt = groups, time.Now()
	m.mu.Unlock()
	if g, ok = groups[name]; !ok {
		return g, &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: name}}
	}
	return g, nil
}

// ensure loads the group versions into the mapper. force reloads those
// loaded longer than minRefresh ago, for a lookup that found nothing.
func (m *lazyMapper) ensure(group string, versions []string, force bool) error {
	for _, v := range versions {
		if err := m.ensureOne(schema.GroupVersion{Group: group, Version: v}, force); err != nil {
			return err
		}
	}
	return nil
}

// ensureOne loads gv unless it is loaded (and, with force, recently).
// Callers that need a group version being loaded wait for that load and
// share its outcome: thousands of clusters sharing a mapper start at once
// and look up the same kinds: one request to the server, not one per
// cluster.
func (m *lazyMapper) ensureOne(gv schema.GroupVersion, force bool) error {
	m.mu.Lock()
	at, ok := m.loaded[gv]
	m.mu.Unlock()
	if ok && (!force || time.Since(at) < m.refresh) {
		return nil
	}
	_, err, _ := m.loads.Do(gv.String(), func() (any, error) { return nil, m.load(gv) })
	return err
}

// load asks the server for gv's resources and adds them to the mapper.
func (m *lazyMapper) load(gv schema.GroupVersion) error {
	list, err := retryTimedOut(func() (*metav1.APIResourceList, error) {
		return m.discovery.ServerResourcesForGroupVersion(gv.String())
	})
	if err != nil {
		if apierrors.IsNotFound(err) {
			m.mu.Lock()
			m.loaded[gv] = time.Now() // an unknown version: nothing to map
			m.mu.Unlock()
			return nil
		}
		return fmt.Errorf("failed to get resources of %s: %w", gv, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range list.APIResources {
		if strings.Contains(r.Name, "/") {
			continue // a subresource
		}
		scope := meta.RESTScopeRoot
		if r.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		singular := r.SingularName
		if singular == "" {
			singular = strings.ToLower(r.Kind)
		}
		m.mapper.AddSpecific(gv.WithKind(r.Kind), gv.WithResource(r.Name), gv.WithResource(singular), scope)
	}
	m.loaded[gv] = time.Now()
	return nil
}

// lookup runs fn on the mapper after loading the group versions it needs
// (those asked for, or the group's preferred one), and once more after
// reloading them if fn found no match.
func lookup[T any](m *lazyMapper, group string, versions []string, fn func(r meta.RESTMapper, versions []string) (T, error)) (T, error) {
	var zero T
	vs, err := m.versionsOf(group, versions)
	if err != nil {
		return zero, err
	}
	if err := m.ensure(group, vs, false); err != nil {
		return zero, err
	}
	res, err := read(m, fn, vs)
	if err == nil || !meta.IsNoMatchError(err) {
		return res, err
	}
	if err := m.ensure(group, vs, true); err != nil {
		return zero, err
	}
	return read(m, fn, vs)
}

// read runs fn under the lock: the mapper is not safe for reads concurrent
// with additions.
func read[T any](m *lazyMapper, fn func(r meta.RESTMapper, versions []string) (T, error), vs []string) (T, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fn(m.mapper, vs)
}

// RESTMapping returns the mapping of a kind, loading its group version first.
func (m *lazyMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return lookup(m, gk.Group, versions, func(r meta.RESTMapper, vs []string) (*meta.RESTMapping, error) {
		return r.RESTMapping(gk, vs...)
	})
}

// RESTMappings returns the mappings of a kind, loading its group versions first.
func (m *lazyMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return lookup(m, gk.Group, versions, func(r meta.RESTMapper, vs []string) ([]*meta.RESTMapping, error) {
		return r.RESTMappings(gk, vs...)
	})
}

// KindFor returns the kind of a resource.
func (m *lazyMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return byResource(m, resource, meta.RESTMapper.KindFor)
}

// KindsFor returns the kinds of a resource.
func (m *lazyMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return byResource(m, resource, meta.RESTMapper.KindsFor)
}

// ResourceFor completes a partial resource.
func (m *lazyMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return byResource(m, input, meta.RESTMapper.ResourceFor)
}

// ResourcesFor completes a partial resource.
func (m *lazyMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return byResource(m, input, meta.RESTMapper.ResourcesFor)
}

// byResource looks a resource up in its group version, loading it first.
func byResource[T any](m *lazyMapper, resource schema.GroupVersionResource, f func(meta.RESTMapper, schema.GroupVersionResource) (T, error)) (T, error) {
	return lookup(m, resource.Group, []string{resource.Version}, func(r meta.RESTMapper, _ []string) (T, error) {
		return f(r, resource)
	})
}

// ResourceSingularizer answers from the group versions loaded so far: a
// resource name alone does not say which group to load.
func (m *lazyMapper) ResourceSingularizer(resource string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mapper.ResourceSingularizer(resource)
}
