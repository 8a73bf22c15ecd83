// Command kubeconfig-secret onboards a member cluster to a fleet run by the
// kubeconfig provider (providers/kubeconfig), with package
// providers/kubeconfig/onboard. A platform admin runs it
// with admin access to the member and write access to Secrets on the host:
//
//	go run ./cmd/kubeconfig-secret -name eu-west-1 \
//	    -member-kubeconfig ~/.kube/eu-west-1.yaml -host-kubeconfig ~/.kube/hub.yaml \
//	    -namespace fleet-system -rules rules.yaml
//
// In the member it creates a ServiceAccount (-service-account-namespace,
// -service-account), a ClusterRole with the rules of the -rules file and a
// ClusterRoleBinding, then requests a token for the ServiceAccount
// (TokenRequest, -expiration). On the host it creates or updates the Secret
// <namespace>/<name>, labelled multicluster-runtime.io/kubeconfig=true, whose
// "kubeconfig" key holds a kubeconfig with that token. Running it again rotates
// the token; the provider re-engages the cluster with the new credentials.
//
// The rules file is YAML: either a ClusterRole-like object with a "rules"
// list, or the list of rules itself:
//
//	rules:
//	- apiGroups: [""]
//	  resources: ["configmaps"]
//	  verbs: ["get", "list", "watch"]
//
// The token is written only to the Secret; it is never printed, and neither
// is any credential of the kubeconfigs it reads. The token is bound to a
// Secret created next to the ServiceAccount: when a step after the token
// request fails (the host write, say), the command deletes what it created in
// the member, which revokes the token. -expiration must be positive and
// -server an https URL without credentials.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig/onboard"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig-secret:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("kubeconfig-secret", flag.ContinueOnError)
	var (
		opts                      onboard.Options
		memberPath, memberContext string
		hostPath, hostContext     string
		rulesPath                 string
	)
	fs.StringVar(&opts.ClusterName, "name", "", "cluster name, and name of the Secret on the host (required)")
	fs.StringVar(&memberPath, "member-kubeconfig", "", "kubeconfig of the member cluster (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&memberContext, "member-context", "", "context of the member kubeconfig (default: its current context)")
	fs.StringVar(&hostPath, "host-kubeconfig", "", "kubeconfig of the host cluster (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&hostContext, "host-context", "", "context of the host kubeconfig (default: its current context)")
	fs.StringVar(&opts.Namespace, "namespace", kubeconfig.DefaultNamespace, "host namespace of the Secret")
	fs.StringVar(&opts.ServiceAccountNamespace, "service-account-namespace", onboard.DefaultServiceAccountNamespace, "member namespace of the ServiceAccount")
	fs.StringVar(&opts.ServiceAccountName, "service-account", onboard.DefaultServiceAccountName, "name of the member ServiceAccount")
	fs.StringVar(&rulesPath, "rules", "", "YAML file with the RBAC rules granted to the ServiceAccount")
	fs.DurationVar(&opts.TokenExpiration, "expiration", onboard.DefaultTokenExpiration, "requested token lifetime")
	fs.StringVar(&opts.Server, "server", "", "member API server URL as reached from the host (default: from the member kubeconfig)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if opts.ClusterName == "" {
		return errors.New("-name is required")
	}
	if opts.TokenExpiration <= 0 {
		return fmt.Errorf("-expiration %s: must be positive", opts.TokenExpiration)
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	if rulesPath != "" {
		data, err := os.ReadFile(rulesPath)
		if err != nil {
			return err
		}
		if opts.Rules, err = parseRules(data); err != nil {
			return fmt.Errorf("rules file %q: %w", rulesPath, err)
		}
	}
	memberConfig, err := loadConfig(memberPath, memberContext)
	if err != nil {
		return fmt.Errorf("member kubeconfig: %w", redactWith(err, memberPath))
	}
	hostConfig, err := loadConfig(hostPath, hostContext)
	if err != nil {
		return fmt.Errorf("host kubeconfig: %w", redactWith(err, hostPath))
	}
	host, err := client.New(hostConfig, client.Options{})
	if err != nil {
		return fmt.Errorf("connecting to the host: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	secret, err := onboard.Cluster(ctx, memberConfig, host, opts)
	if err != nil {
		// Errors quote request URLs; the kubeconfigs may put credentials there.
		return redact.Err(err)
	}
	fmt.Printf("registered cluster %q: Secret %s/%s on the host, ServiceAccount %s/%s in the member\n",
		opts.ClusterName, secret.Namespace, secret.Name, opts.ServiceAccountNamespace, opts.ServiceAccountName)
	return nil
}

// redactWith redacts err, and every word it quotes from the kubeconfig at
// path (when one was given).
func redactWith(err error, path string) error {
	var data []byte
	if path != "" {
		data, _ = os.ReadFile(path)
	}
	return redact.Error(err, data)
}

func loadConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
}

// parseRules reads RBAC rules from a ClusterRole-like object or a plain list.
func parseRules(data []byte) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var object map[string]json.RawMessage
	if err := yaml.Unmarshal(data, &object); err == nil {
		raw, ok := object["rules"]
		if !ok {
			return nil, errors.New(`the object has no "rules" list`)
		}
		if err := json.Unmarshal(raw, &rules); err != nil {
			return nil, fmt.Errorf(`"rules" is not a list of rules: %w`, err)
		}
	} else if err := yaml.Unmarshal(data, &rules); err != nil {
		return nil, fmt.Errorf("neither an object with a rules list nor a list of rules: %w", err)
	}
	if len(rules) == 0 {
		return nil, errors.New("the rules list is empty: grant the ServiceAccount at least one rule")
	}
	return rules, nil
}
