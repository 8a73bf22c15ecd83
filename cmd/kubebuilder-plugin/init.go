package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/kubebuilder/v4/pkg/plugin/external"
)

// initData fills templates/main.go.tmpl and templates/providers.go.tmpl.
type initData struct {
	Boilerplate      string
	Marker           string
	LeaderElectionID string
	// Namespace is the project's namespace in config/ (go/v4's
	// "<project>-system"): where the kubeconfig provider reads its Secrets.
	Namespace string
	// ProjectName labels the manifests, as go/v4's.
	ProjectName string
}

var (
	leaderElectionIDRE = regexp.MustCompile(`LeaderElectionID:\s*"([^"]+)"`)
	namespaceRE        = regexp.MustCompile(`(?m)^namespace:\s*(\S+)\s*$`)
	projectNameRE      = regexp.MustCompile(`(?m)^\s*app\.kubernetes\.io/name:\s*(\S+)\s*$`)
)

const (
	rbacKustomization   = "config/rbac/kustomization.yaml"
	providerRoleBinding = "provider_role_binding.yaml"
)

// scaffoldInit rewrites what go/v4's init wrote: cmd/main.go builds a
// Multi-Cluster Manager, cmd/providers.go chooses its provider, and go.mod
// requires the library.
func scaffoldInit(req external.PluginRequest) (map[string]string, error) {
	version, dir := defaultLibraryVersion(), ""
	if err := parseArgs(req.Args, func(fs *pflag.FlagSet) {
		fs.StringVar(&version, flagLibraryVersion, version, "")
		fs.StringVar(&dir, flagLibraryDir, "", "")
	}); err != nil {
		return nil, err
	}
	u := req.Universe
	main, ok := u[mainPath]
	if !ok {
		return nil, fmt.Errorf("%s is missing: run this plugin after go/v4 (--plugins go/v4,%s/%s)", mainPath, PluginName, PluginVersion)
	}
	if scaffoldedByUs(main) {
		return nil, fmt.Errorf("%s is already multi-cluster: the project was initialised with this plugin", mainPath)
	}
	gomod, ok := u[goModPath]
	if !ok {
		return nil, fmt.Errorf("%s is missing: run this plugin after go/v4", goModPath)
	}
	data := initData{Boilerplate: boilerplate(u), Marker: ownMarker, Namespace: "default"}
	if m := leaderElectionIDRE.FindStringSubmatch(main); m != nil {
		data.LeaderElectionID = m[1]
	} else {
		return nil, fmt.Errorf("%s has no LeaderElectionID: not the cmd/main.go go/v4 scaffolds", mainPath)
	}
	if m := namespaceRE.FindStringSubmatch(u["config/default/kustomization.yaml"]); m != nil {
		data.Namespace = m[1]
	}
	data.ProjectName = strings.TrimSuffix(data.Namespace, "-system")
	if m := projectNameRE.FindStringSubmatch(u["config/rbac/role_binding.yaml"]); m != nil {
		data.ProjectName = m[1]
	}

	changed := map[string]string{}
	var err error
	if changed[mainPath], err = render("main.go.tmpl", data); err != nil {
		return nil, err
	}
	if changed[providersPath], err = render("providers.go.tmpl", data); err != nil {
		return nil, err
	}
	if changed[goModPath], err = requireLibrary(gomod, version, dir); err != nil {
		return nil, err
	}
	// The RBAC markers of cmd/providers.go generate a Role in the project's
	// namespace; go/v4's manifests bind only the ClusterRole.
	if k, ok := u[rbacKustomization]; ok {
		if changed["config/rbac/"+providerRoleBinding], err = renderText(providerRoleBinding+".tmpl", data); err != nil {
			return nil, err
		}
		if !strings.Contains(k, "- "+providerRoleBinding) {
			if strings.Contains(k, "- role_binding.yaml\n") {
				k = strings.Replace(k, "- role_binding.yaml\n", "- role_binding.yaml\n- "+providerRoleBinding+"\n", 1)
			} else {
				k = strings.TrimRight(k, "\n") + "\n- " + providerRoleBinding + "\n"
			}
			changed[rbacKustomization] = k
		}
	}
	return changed, nil
}
