package kubeconfig

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
	_ multicluster.ListingProvider  = &Provider{}
)

const (
	// DefaultNamespace is the namespace watched when Options.Namespace is empty.
	DefaultNamespace = "default"
	// DefaultKubeconfigSecretLabel is the label key a Secret must carry, with
	// the value "true", to be read.
	DefaultKubeconfigSecretLabel = "multicluster-runtime.io/kubeconfig"
	// UpstreamKubeconfigSecretLabel is the label key of the upstream
	// multicluster-runtime design. With Options.KubeconfigSecretLabel unset,
	// Secrets labelled with it (value "true") are read too, so that Secrets
	// written for that design work unchanged.
	UpstreamKubeconfigSecretLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig"
	// DefaultKubeconfigSecretKey is the data key holding the kubeconfig.
	DefaultKubeconfigSecretKey = "kubeconfig"
	// ControllerName is the name of the controller SetupWithManager registers.
	ControllerName = "multicluster-kubeconfig-provider"
)

// Event reasons recorded on Secrets.
const (
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
	// ReasonKubeconfigRefused: the kubeconfig asks for something a Secret is
	// not trusted with (an exec or auth-provider plugin, a local file).
	ReasonKubeconfigRefused = "KubeconfigRefused"
	ReasonEngageFailed      = inventory.ReasonEngageFailed
	ReasonEngaged           = inventory.ReasonEngaged
	// ReasonCredentialsExpiring: the kubeconfig's token expires soon and
	// the Secret was not given another.
	ReasonCredentialsExpiring = inventory.ReasonCredentialsExpiring
)

// Options configure a Provider. The zero value uses the defaults above.
type Options struct {
	// Namespace holds the kubeconfig Secrets. Defaults to DefaultNamespace.
	Namespace string
	// KubeconfigSecretLabel is the label key that marks kubeconfig Secrets;
	// its value must be "true". Defaults to DefaultKubeconfigSecretLabel and
	// UpstreamKubeconfigSecretLabel, either of which marks a Secret; set, it
	// is the only one.
	KubeconfigSecretLabel string
	// KubeconfigSecretKey is the data key holding the kubeconfig. Defaults to
	// DefaultKubeconfigSecretKey.
	KubeconfigSecretKey string
	// ClusterOptions are applied to every cluster the provider creates.
	ClusterOptions []cluster.Option
	// KubeconfigPolicy says what the kubeconfigs of Secrets may contain.
	// Anyone who can write a labelled Secret in Namespace chooses them, so
	// the zero value refuses exec and auth-provider plugins, every local
	// file reference (token, certificate, key and CA files), proxy-url,
	// insecure-skip-tls-verify and tls-server-name: the Secret gets a
	// KubeconfigRefused Warning Event. List the exec plugin commands your
	// installation relies on in KubeconfigPolicy.AllowedExecCommands.
	KubeconfigPolicy pkgclusters.KubeconfigPolicy
	// ControllerName names the controller SetupWithManager registers, its
	// logger and its Events' reporting controller. Defaults to ControllerName;
	// set it to run two providers in one manager.
	ControllerName string
	// RESTOptions change the rest.Config of every cluster after it was read
	// from its kubeconfig (rate limits, timeouts, user agent), in order. An
	// error refuses the Secret's cluster, reported on the Secret.
	RESTOptions []func(cfg *rest.Config) error
	// HealthCheck, if set, checks the health of each of the provider's
	// clusters on every probe, after /readyz and the manager's own check
	// (mcmanager.HealthOptions.Check): "this CRD is served", say. An error
	// counts as a failed probe. See mcmanager.ClusterHealthChecker.
	HealthCheck func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error
}

// Provider engages one cluster per labelled kubeconfig Secret. Create it with
// New, pass it to mcmanager.New, and call SetupWithManager, which reads the
// Secrets through caches of the provider's own (one per label key), limited
// to Options.Namespace and to Secrets carrying the label: the provider needs
// no access to other Secrets, and keeps no others in memory. A Secret that
// loses the label leaves that cache, which disengages its cluster.
type Provider struct {
	*inventory.Kit[*corev1.Secret] // Get, IndexField, ClusterNames, Start, Listed, SetupWithManager

	opts Options
}

// New returns a provider for the Secrets described by opts.
func New(opts Options) *Provider {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	keys := []string{opts.KubeconfigSecretLabel}
	if opts.KubeconfigSecretLabel == "" {
		keys = []string{DefaultKubeconfigSecretLabel, UpstreamKubeconfigSecretLabel}
	}
	if opts.KubeconfigSecretKey == "" {
		opts.KubeconfigSecretKey = DefaultKubeconfigSecretKey
	}
	if opts.ControllerName == "" {
		opts.ControllerName = ControllerName
	}
	p := &Provider{opts: opts}
	selectors := make([]labels.Selector, 0, len(keys))
	for _, key := range keys {
		selectors = append(selectors, labels.SelectorFromSet(labels.Set{key: "true"}))
	}
	p.Kit = inventory.New(inventory.Options[*corev1.Secret]{
		Name:              opts.ControllerName,
		Object:            &corev1.Secret{},
		Desire:            p.desire,
		Namespaces:        []string{opts.Namespace},
		Selectors:         selectors,
		InvalidNameReason: ReasonInvalidKubeconfig,
		ClusterOptions:    opts.ClusterOptions,
		HealthCheck:       opts.HealthCheck,
	})
	return p
}

// desire reads the cluster a Secret asks for: named after the Secret, run
// with its kubeconfig. A bad kubeconfig stays bad until the Secret changes,
// which reconciles it again: it is reported once, and not retried.
func (p *Provider) desire(_ context.Context, _ client.Reader, s *corev1.Secret) (inventory.Desired, error) {
	data := s.Data[p.opts.KubeconfigSecretKey]
	if len(data) == 0 {
		return inventory.Desired{}, inventory.Refused(ReasonInvalidKubeconfig,
			fmt.Errorf("cluster %q: Secret %s/%s has no data under key %q", s.Name, s.Namespace, s.Name, p.opts.KubeconfigSecretKey))
	}
	cfg, err := pkgclusters.RESTConfigFromUntrustedKubeconfig(data, p.opts.KubeconfigPolicy)
	if err != nil {
		reason := ReasonInvalidKubeconfig
		if errors.Is(err, pkgclusters.ErrKubeconfigRefused) {
			reason = ReasonKubeconfigRefused
		}
		return inventory.Desired{}, inventory.Refused(reason, fmt.Errorf("cluster %q: Secret %s/%s: kubeconfig under key %q: %w",
			s.Name, s.Namespace, s.Name, p.opts.KubeconfigSecretKey, redact.Error(err, data)))
	}
	for i, opt := range p.opts.RESTOptions {
		if err := opt(cfg); err != nil {
			return inventory.Desired{}, inventory.Refused(ReasonInvalidKubeconfig, fmt.Errorf("cluster %q: Secret %s/%s: RESTOptions[%d]: %w",
				s.Name, s.Namespace, s.Name, i, redact.Error(err, data)))
		}
	}
	return inventory.Desired{Name: s.Name, Config: cfg, Hash: inventory.Hash(data), Sensitive: data}, nil
}
