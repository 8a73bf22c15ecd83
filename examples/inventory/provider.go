package main

// snippet:inventory-provider
import (
	"context"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// EntryLabel marks the ConfigMaps that are cluster entries: their data
// "server" is the cluster's https URL; the Secret "<entry>-credentials" of
// the same namespace holds its "token" and "ca.crt".
const (
	EntryLabel        = "example.com/cluster-entry"
	CredentialsSuffix = "-credentials"
)

// Event reasons of this provider; the kit adds ClusterEngaged,
// ClusterEngageFailed and DuplicateClusterName.
const (
	ReasonInvalidEntry      = "InvalidEntry"
	ReasonCredentialsMissed = "CredentialsMissing"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
)

// Provider engages one cluster per entry ConfigMap in a namespace of the
// host, named after the ConfigMap.
type Provider struct {
	*inventory.Kit[*corev1.ConfigMap] // Get, IndexField, ClusterNames, Start, Listed, SetupWithManager
}

// NewProvider returns a provider for the entries of namespace.
func NewProvider(namespace string) *Provider {
	entries := labels.SelectorFromSet(labels.Set{EntryLabel: "true"})
	return &Provider{Kit: inventory.New(inventory.Options[*corev1.ConfigMap]{
		Name:       "example-inventory-provider",
		Object:     &corev1.ConfigMap{},
		Namespaces: []string{namespace},
		Selectors:  []labels.Selector{entries},
		// The credentials: a change to a Secret considers its entries again.
		Related: []inventory.Related{{Object: &corev1.Secret{}, Owners: entriesOf}},
		Desire:  desire,
	})}
}

// desire says what one entry asks for.
func desire(ctx context.Context, r client.Reader, entry *corev1.ConfigMap) (inventory.Desired, error) {
	server, err := url.Parse(entry.Data["server"])
	if err != nil || server.Scheme != "https" || server.Host == "" {
		// Only a change of the entry can fix it: reported once, not retried.
		return inventory.Desired{}, inventory.Refused(ReasonInvalidEntry,
			fmt.Errorf("ConfigMap %s/%s: data \"server\" must be an https URL", entry.Namespace, entry.Name))
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: entry.Namespace, Name: entry.Name + CredentialsSuffix}
	if err := r.Get(ctx, key, secret); err != nil {
		// Gone credentials must not stay in use: withdraw, and say why.
		return inventory.Desired{Withdrawn: "its credentials Secret is missing"}, inventory.Refused(ReasonCredentialsMissed,
			fmt.Errorf("ConfigMap %s/%s: Secret %s: %w", entry.Namespace, entry.Name, key, err))
	}
	token, ca := secret.Data["token"], secret.Data["ca.crt"]
	return inventory.Desired{
		Name: entry.Name,
		Config: &rest.Config{
			Host:            server.String(),
			BearerToken:     string(token),
			TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		},
		Hash:      inventory.Hash([]byte(server.String()), []byte{0}, token, []byte{0}, ca),
		Sensitive: token,
	}, nil
}

// entriesOf maps a credentials Secret to its entry.
func entriesOf(secret client.Object) []client.ObjectKey {
	name, ok := strings.CutSuffix(secret.GetName(), CredentialsSuffix)
	if !ok {
		return nil
	}
	return []client.ObjectKey{{Namespace: secret.GetNamespace(), Name: name}}
}

// end-snippet
