package build

import (
	"errors"
	"strings"
	"testing"
)

const kubeconfigTemplate = `apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
%s
users:
- name: u
  user:
%s
`

func kubeconfigWith(cluster, user string) []byte {
	return []byte(strings.ReplaceAll(strings.ReplaceAll(kubeconfigTemplate, "%s\nusers", cluster+"\nusers"), "%s\n", user+"\n"))
}

func TestUntrustedKubeconfigRefusesCommandsAndFiles(t *testing.T) {
	cases := map[string][]byte{
		"exec":          kubeconfigWith("", "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh-secret-cmd, args: [-c, id]}"),
		"tokenFile":     kubeconfigWith("", "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"),
		"client-key":    kubeconfigWith("", "    client-key: /etc/key.pem"),
		"client-cert":   kubeconfigWith("", "    client-certificate: /etc/cert.pem"),
		"auth-provider": kubeconfigWith("", "    auth-provider: {name: oidc}"),
		"ca-file":       kubeconfigWith("    certificate-authority: /etc/ca.pem", "    token: abc"),
		"proxy-url":     kubeconfigWith("    proxy-url: http://127.0.0.1:3128/etc/", "    token: abc"),
		"insecure":      kubeconfigWith("    insecure-skip-tls-verify: true", "    token: abc"),
		"server-name":   kubeconfigWith("    tls-server-name: attacker.example/etc/", "    token: abc"),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := RESTConfigFromUntrustedKubeconfig(data, KubeconfigPolicy{})
			if !errors.Is(err, ErrKubeconfigRefused) {
				t.Fatalf("want ErrKubeconfigRefused, got %v", err)
			}
			for _, secret := range []string{"/bin/sh-secret-cmd", "/var/run/secrets", "/etc/"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error quotes the kubeconfig's value %q: %v", secret, err)
				}
			}
		})
	}
}

func TestUntrustedKubeconfigAllowsListedExecAndPlainCredentials(t *testing.T) {
	exec := kubeconfigWith("", "    exec: {apiVersion: client.authentication.k8s.io/v1, command: my-plugin, interactiveMode: Never}")
	if _, err := RESTConfigFromUntrustedKubeconfig(exec, KubeconfigPolicy{AllowedExecCommands: []string{"my-plugin"}}); err != nil {
		t.Fatalf("allowed exec command refused: %v", err)
	}
	plain := kubeconfigWith("    certificate-authority-data: \"\"", "    token: abcdefghijkl")
	cfg, err := RESTConfigFromUntrustedKubeconfig(plain, KubeconfigPolicy{})
	if err != nil {
		t.Fatalf("plain kubeconfig refused: %v", err)
	}
	if cfg.BearerToken != "abcdefghijkl" || cfg.Host != "https://127.0.0.1:6443" {
		t.Fatalf("unexpected config: host %q", cfg.Host)
	}
	steered := kubeconfigWith("    insecure-skip-tls-verify: true\n    proxy-url: http://127.0.0.1:3128\n    tls-server-name: other", "    token: abcdefghijkl")
	policy := KubeconfigPolicy{AllowProxyURL: true, AllowInsecureSkipTLSVerify: true, AllowTLSServerName: true}
	if cfg, err := RESTConfigFromUntrustedKubeconfig(steered, policy); err != nil || !cfg.Insecure || cfg.Proxy == nil || cfg.ServerName != "other" {
		t.Fatalf("proxy and TLS settings allowed by the policy: %v", err)
	}
	if _, err := RESTConfigFromUntrustedKubeconfig(plain, KubeconfigPolicy{MaxSize: 10}); !errors.Is(err, ErrKubeconfigRefused) {
		t.Fatalf("oversized kubeconfig: want ErrKubeconfigRefused, got %v", err)
	}
}
