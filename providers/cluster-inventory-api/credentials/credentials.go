package credentials

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"k8s.io/client-go/rest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
)

// AccessProvider is one credential plugin the controller may run, in the
// format of KEP-5339's provider configuration. A ClusterProfile selects it by
// Name in status.accessProviders; the command always comes from here.
type AccessProvider struct {
	// Name matched against the names in a profile's status.accessProviders.
	Name string `json:"name"`
	// ExecConfig is the client-go exec credential plugin to run: apiVersion
	// (client.authentication.k8s.io/v1 or v1beta1), command, args, env and
	// provideClusterInfo. With provideClusterInfo the plugin receives the
	// profile's cluster (server, CA, proxy URL and the
	// client.authentication.k8s.io/exec extension) in KUBERNETES_EXEC_INFO.
	// interactiveMode defaults to Never: a controller has no terminal.
	ExecConfig clientcmdv1.ExecConfig `json:"execConfig"`
	// AllowedServers restricts the servers this provider's credentials may
	// be sent to: each entry is a CIDR (10.0.0.0/8, matching servers given
	// as an IP address) or a host pattern, with or without a port, where *
	// matches any run of characters, dots included ("*.eks.amazonaws.com",
	// "api.example.com:6443"). Default: any server but loopback, link-local
	// and unspecified addresses, "localhost" and the hub's own address,
	// which are refused unless an entry matches them. This field is an
	// extension of this library to KEP-5339's format.
	AllowedServers []string `json:"allowedServers,omitempty"`
	// ProfileSourcedCLIArgsPolicy says whether the arguments of a profile's
	// ExtensionAdditionalArgs extension are appended to ExecConfig.Args
	// (Append) or dropped (Ignore). Default Ignore: a profile's writer is
	// not trusted with the plugin's command line.
	ProfileSourcedCLIArgsPolicy CLIArgsPolicy `json:"profileSourcedCLIArgsPolicy,omitempty"`
	// ProfileSourcedEnvVarsPolicy says what becomes of the variables of a
	// profile's ExtensionAdditionalEnvs extension: added where
	// ExecConfig.Env does not set them (AppendIfNotExists), added and
	// replacing configured ones (Replace), or dropped (Ignore). Default
	// Ignore.
	ProfileSourcedEnvVarsPolicy EnvVarsPolicy `json:"profileSourcedEnvVarsPolicy,omitempty"`
}

// AccessProvidersConfig is the KEP-5339 configuration file (the format of
// the cluster-inventory-api project's credentials library; unknown fields
// are an error):
//
//	providers:
//	- name: token
//	  execConfig:
//	    apiVersion: client.authentication.k8s.io/v1
//	    command: /usr/local/bin/serviceaccount-token-plugin
//	    args: ["-kubeconfig=/etc/fleet/operator.kubeconfig", "-service-account=fleet-controller"]
//	    provideClusterInfo: true
//	  profileSourcedCLIArgsPolicy: Ignore       # or Append
//	  profileSourcedEnvVarsPolicy: Ignore       # or AppendIfNotExists, Replace
type AccessProvidersConfig struct {
	Providers []AccessProvider `json:"providers"`
}

// LoadAccessProviders reads a KEP-5339 configuration file (JSON or YAML) and
// returns its providers, validated.
func LoadAccessProviders(path string) ([]AccessProvider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading access providers: %w", err)
	}
	var cfg AccessProvidersConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("access providers file %s: %w", path, err)
	}
	if err := ValidateAccessProviders(cfg.Providers); err != nil {
		return nil, fmt.Errorf("access providers file %s: %w", path, err)
	}
	return cfg.Providers, nil
}

var execAPIVersions = []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}

// ValidateAccessProviders checks a controller's access providers: at least
// one, each named once, with a command, a supported exec API version, valid
// policies and valid AllowedServers.
func ValidateAccessProviders(aps []AccessProvider) error {
	if len(aps) == 0 {
		return errors.New("no access providers configured: a ClusterProfile could select none")
	}
	seen := map[string]bool{}
	for i, ap := range aps {
		switch {
		case ap.Name == "":
			return fmt.Errorf("access provider %d has no name", i)
		case seen[ap.Name]:
			return fmt.Errorf("access provider %q is configured twice", ap.Name)
		case ap.ExecConfig.Command == "":
			return fmt.Errorf("access provider %q has no execConfig.command", ap.Name)
		case !slices.Contains(execAPIVersions, ap.ExecConfig.APIVersion):
			return fmt.Errorf("access provider %q: execConfig.apiVersion %q is not one of %v", ap.Name, ap.ExecConfig.APIVersion, execAPIVersions)
		}
		if err := validatePolicies(ap); err != nil {
			return fmt.Errorf("access provider %q: %w", ap.Name, err)
		}
		if err := validateAllowedServers(ap.AllowedServers); err != nil {
			return fmt.Errorf("access provider %q: %w", ap.Name, err)
		}
		seen[ap.Name] = true
	}
	return nil
}

// ErrNoAccessProvider is returned, wrapped, for a profile that offers none of
// the configured access providers.
var ErrNoAccessProvider = errors.New("no configured access provider")

// SelectAccessProvider returns the first configured access provider that the
// profile offers, with the profile's entry for it. It reads
// status.accessProviders, or the deprecated status.credentialProviders when
// the former is empty.
func SelectAccessProvider(profile *v1alpha1.ClusterProfile, configured []AccessProvider) (AccessProvider, v1alpha1.AccessProvider, error) {
	offered := profile.Status.AccessProviders
	if len(offered) == 0 {
		//lint:ignore SA1019 the KEP's fallback: read while inventories still write it
		offered = profile.Status.CredentialProviders
	}
	for _, ap := range configured {
		for _, o := range offered {
			if o.Name == ap.Name {
				return ap, o, nil
			}
		}
	}
	names := make([]string, 0, len(offered))
	for _, o := range offered {
		names = append(names, o.Name)
	}
	conf := make([]string, 0, len(configured))
	for _, ap := range configured {
		conf = append(conf, ap.Name)
	}
	return AccessProvider{}, v1alpha1.AccessProvider{}, fmt.Errorf("%w: the profile offers %q, the controller is configured with %q", ErrNoAccessProvider, names, conf)
}

// RESTConfig builds the rest.Config for a profile's access provider entry:
// the entry's cluster (server, CA data, and the
// client.authentication.k8s.io/exec extension) authenticated by the
// configured exec plugin, through client-go's kubeconfig loading and exec
// credential support. The cluster entry is untrusted: a certificate-authority
// file reference is refused, proxy-url, insecure-skip-tls-verify and
// tls-server-name are refused unless policy allows them, the server must be
// one the access provider's credentials may go to (AllowedServers; never
// loopback, link-local or the hub unless listed there), and only the
// configured command may run. The plugin, given provideClusterInfo, sees the
// server, CA, proxy and TLS settings the credentials will be sent with. It
// also returns a hash of everything the configuration depends on.
func RESTConfig(ap AccessProvider, entry v1alpha1.AccessProvider, policy ProfilePolicy) (*rest.Config, string, error) {
	exec := ap.ExecConfig.DeepCopy()
	if exec.InteractiveMode == "" {
		exec.InteractiveMode = clientcmdv1.NeverExecInteractiveMode
	}
	if err := applyProfileSourced(ap, exec, entry.Cluster); err != nil {
		return nil, "", fmt.Errorf("access provider %q: %w", ap.Name, err)
	}
	const name = "cluster"
	kc := clientcmdv1.Config{
		APIVersion:     "v1",
		Kind:           "Config",
		Clusters:       []clientcmdv1.NamedCluster{{Name: name, Cluster: *entry.Cluster.DeepCopy()}},
		AuthInfos:      []clientcmdv1.NamedAuthInfo{{Name: name, AuthInfo: clientcmdv1.AuthInfo{Exec: exec}}},
		Contexts:       []clientcmdv1.NamedContext{{Name: name, Context: clientcmdv1.Context{Cluster: name, AuthInfo: name}}},
		CurrentContext: name,
	}
	data, err := json.Marshal(kc)
	if err != nil {
		return nil, "", fmt.Errorf("access provider %q: encoding the cluster entry: %w", ap.Name, err)
	}
	if entry.Cluster.Server == "" {
		return nil, "", fmt.Errorf("access provider %q: the cluster entry has no server", ap.Name)
	}
	checkDial, err := serverCheck{allowed: ap.AllowedServers, hub: hubHostPort(policy.HubServer)}.check(entry.Cluster.Server)
	if err != nil {
		return nil, "", fmt.Errorf("access provider %q: %w", ap.Name, err)
	}
	cfg, err := pkgclusters.RESTConfigFromUntrustedKubeconfig(data, pkgclusters.KubeconfigPolicy{
		AllowedExecCommands:        []string{exec.Command},
		AllowProxyURL:              policy.AllowProxyURL,
		AllowInsecureSkipTLSVerify: policy.AllowInsecureSkipTLSVerify,
		AllowTLSServerName:         policy.AllowTLSServerName,
	})
	if err != nil {
		return nil, "", fmt.Errorf("access provider %q: %w", ap.Name, err)
	}
	if checkDial && entry.Cluster.ProxyURL == "" {
		guardDial(cfg)
	}
	sum := sha256.Sum256(data)
	return cfg, hex.EncodeToString(sum[:]), nil
}
