package fleettest

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig returns a kubeconfig for member i with a single context named
// contextName, embedding the member's server, CA and client certificate.
func (f *Fleet) Kubeconfig(i int, contextName string) ([]byte, error) {
	return KubeconfigFor(f.Config(i), contextName)
}

// KubeconfigFor serialises cfg (server, CA data, client certificate and key,
// or bearer token) as a kubeconfig with one context named contextName, which
// is also the current context.
func KubeconfigFor(cfg *rest.Config, contextName string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[contextName] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos[contextName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	kc.CurrentContext = contextName
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("fleettest: writing kubeconfig for %q: %w", contextName, err)
	}
	return out, nil
}

// WriteKubeconfig writes member i's kubeconfig (one context named
// contextName) to path with mode 0600, for providers and tools that read
// kubeconfig files.
func (f *Fleet) WriteKubeconfig(i int, path, contextName string) error {
	kc, err := f.Kubeconfig(i, contextName)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		return fmt.Errorf("fleettest: writing kubeconfig of member %d: %w", i, err)
	}
	return nil
}
