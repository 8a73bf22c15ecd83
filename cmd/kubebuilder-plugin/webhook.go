package main

import (
	"fmt"
	"go/format"
	"regexp"

	"sigs.k8s.io/kubebuilder/v4/pkg/plugin/external"
)

// go/v4 wires a webhook in cmd/main.go with the single-cluster manager.
var webhookSetupRE = regexp.MustCompile(`\.Setup(\w+)WebhookWithManager\(mgr\)`)

// scaffoldWebhook wires the webhooks go/v4 scaffolded with the host
// cluster's manager: admission webhooks serve the host's API server. The
// webhook itself and its test (go/v4's, on one envtest control plane) stay
// as go/v4 wrote them.
func scaffoldWebhook(req external.PluginRequest) (map[string]string, error) {
	main, ok := req.Universe[mainPath]
	if !ok || !scaffoldedByUs(main) {
		return nil, fmt.Errorf("%s is not multi-cluster: initialise the project with --plugins go/v4,%s/%s", mainPath, PluginName, PluginVersion)
	}
	out := webhookSetupRE.ReplaceAllString(main, ".Setup${1}WebhookWithManager(mgr.GetLocalManager())")
	b, err := format.Source([]byte(out))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mainPath, err)
	}
	return map[string]string{mainPath: string(b)}, nil
}
