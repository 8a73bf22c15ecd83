package build

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
)

// DefaultMaxKubeconfigSize bounds the kubeconfigs read by
// RESTConfigFromUntrustedKubeconfig when KubeconfigPolicy.MaxSize is zero.
const DefaultMaxKubeconfigSize = 1 << 20

// ErrKubeconfigRefused is returned, wrapped, when a kubeconfig asks for
// something its source is not trusted with: running a command, reading a local
// file, or an auth-provider plugin.
var ErrKubeconfigRefused = errors.New("kubeconfig refused")

// KubeconfigPolicy says what a kubeconfig read from the cluster (a Secret, a
// Cluster API object, an inventory entry) may contain. Whoever can write such
// an object must not be able to run code in the controller or make it send a
// local file (its own ServiceAccount token, say) to a server of their choice,
// nor steer the credentials it holds through a proxy or past TLS checks of
// their choice. The zero value refuses exec plugins, auth-provider plugins,
// every local file reference, proxy-url, insecure-skip-tls-verify and
// tls-server-name.
type KubeconfigPolicy struct {
	// AllowedExecCommands lists the exec credential plugin commands a
	// kubeconfig may name, compared with the command exactly as written.
	// Default: none.
	AllowedExecCommands []string
	// AllowProxyURL accepts a cluster's proxy-url: whoever writes the
	// kubeconfig then chooses a proxy that sees every request, credentials
	// included, unless TLS to the server is verified end to end. Default:
	// refused.
	AllowProxyURL bool
	// AllowInsecureSkipTLSVerify accepts insecure-skip-tls-verify: the
	// server is then not authenticated, and anyone on the path may receive
	// the credentials. Default: refused.
	AllowInsecureSkipTLSVerify bool
	// AllowTLSServerName accepts tls-server-name, which verifies the
	// server's certificate against another name than the server's host.
	// Default: refused.
	AllowTLSServerName bool
	// MaxSize bounds the kubeconfig in bytes. Default DefaultMaxKubeconfigSize.
	MaxSize int
}

// RESTConfigFromUntrustedKubeconfig builds the rest.Config of a kubeconfig's
// current context after checking the context's cluster and user against
// policy. Errors name the offending field, never its value.
func RESTConfigFromUntrustedKubeconfig(data []byte, policy KubeconfigPolicy) (*rest.Config, error) {
	maxSize := policy.MaxSize
	if maxSize <= 0 {
		maxSize = DefaultMaxKubeconfigSize
	}
	if len(data) > maxSize {
		return nil, fmt.Errorf("%w: %d bytes, more than the limit of %d", ErrKubeconfigRefused, len(data), maxSize)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("parsing kubeconfig: %w", redact.Error(err, data))
	}
	if err := policy.check(cfg); err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("building client config: %w", redact.Error(err, data))
	}
	return rc, nil
}

// check refuses what the current context's cluster and user may not do.
func (p KubeconfigPolicy) check(cfg *clientcmdapi.Config) error {
	ctxName := cfg.CurrentContext
	kctx, ok := cfg.Contexts[ctxName]
	if !ok {
		if ctxName == "" {
			return errors.New("kubeconfig has no current-context")
		}
		return fmt.Errorf("kubeconfig: current-context %q is not defined", ctxName)
	}
	var refused []string
	if c, ok := cfg.Clusters[kctx.Cluster]; ok {
		if c.CertificateAuthority != "" {
			refused = append(refused, "cluster certificate-authority (a local file)")
		}
		if c.ProxyURL != "" && !p.AllowProxyURL {
			refused = append(refused, "cluster proxy-url (not allowed by the policy)")
		}
		if c.InsecureSkipTLSVerify && !p.AllowInsecureSkipTLSVerify {
			refused = append(refused, "cluster insecure-skip-tls-verify (not allowed by the policy)")
		}
		if c.TLSServerName != "" && !p.AllowTLSServerName {
			refused = append(refused, "cluster tls-server-name (not allowed by the policy)")
		}
	}
	if u, ok := cfg.AuthInfos[kctx.AuthInfo]; ok {
		if u.TokenFile != "" {
			refused = append(refused, "user tokenFile (a local file)")
		}
		if u.ClientCertificate != "" {
			refused = append(refused, "user client-certificate (a local file)")
		}
		if u.ClientKey != "" {
			refused = append(refused, "user client-key (a local file)")
		}
		if u.AuthProvider != nil {
			refused = append(refused, "user auth-provider plugin")
		}
		if u.Exec != nil && !slices.Contains(p.AllowedExecCommands, u.Exec.Command) {
			refused = append(refused, "user exec plugin (its command is not among the allowed exec commands)")
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: context %q uses %v", ErrKubeconfigRefused, ctxName, refused)
	}
	return nil
}
