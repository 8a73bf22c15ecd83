package main

import (
	"fmt"
	"go/format"
	"path"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/kubebuilder/v4/pkg/model/resource"
	"sigs.k8s.io/kubebuilder/v4/pkg/plugin/external"
)

// apiData fills the controller, controller test and suite templates.
type apiData struct {
	Boilerplate string
	Marker      string
	Package     string
	// ImportAlias and ImportPath name the resource's Go package.
	ImportAlias, ImportPath string
	Kind                    string
	ReconcilerName          string
	// ControllerName is the name the controller is registered under (Named).
	ControllerName string
	// RBAC are go/v4's RBAC markers for the resource.
	RBAC []string
	// DoAPI is set when the resource's type is the project's own (a CRD):
	// the tests create objects of it.
	DoAPI bool
	// CRDPath is the path from the controller's package to config/crd/bases.
	CRDPath string
}

var (
	rbacMarkerRE = regexp.MustCompile(`(?m)^// \+kubebuilder:rbac:.*$`)
	// go/v4 wires a reconciler in cmd/main.go with the single-cluster
	// manager's client and scheme; a multi-cluster reconciler takes the
	// Multi-Cluster Manager.
	reconcilerSetupRE = regexp.MustCompile(`\(&(\w+)\.(\w+)\{\s*Client:\s*mgr\.GetClient\(\),\s*Scheme:\s*mgr\.GetScheme\(\),\s*\}\)\.SetupWithManager\(mgr\)`)
)

// scaffoldAPI makes the controller go/v4 just scaffolded multi-cluster: the
// reconciler, its test, the suite (the first time) and its wiring in
// cmd/main.go. Files this plugin wrote before are left alone.
func scaffoldAPI(req external.PluginRequest) (map[string]string, error) {
	var group, version, kind, controllerName string
	if err := parseArgs(req.Args, func(fs *pflag.FlagSet) {
		fs.StringVar(&group, "group", "", "")
		fs.StringVar(&version, "version", "", "")
		fs.StringVar(&kind, "kind", "", "")
		fs.StringVar(&controllerName, "controller-name", "", "")
	}); err != nil {
		return nil, err
	}
	cfg, err := projectConfig(req.Config)
	if err != nil {
		return nil, err
	}
	u := req.Universe
	main, ok := u[mainPath]
	if !ok || !scaffoldedByUs(main) {
		return nil, fmt.Errorf("%s is not multi-cluster: initialise the project with --plugins go/v4,%s/%s", mainPath, PluginName, PluginVersion)
	}
	gvk := resource.GVK{Group: group, Domain: cfg.GetDomain(), Version: version, Kind: kind}
	res, err := cfg.GetResource(gvk)
	if err != nil {
		// A core type (apps/v1 Deployment, ...) has no domain.
		gvk.Domain = ""
		if res, err = cfg.GetResource(gvk); err != nil {
			return nil, fmt.Errorf("resource %s/%s %s is not in the PROJECT file: %w", group, version, kind, err)
		}
	}

	changed := map[string]string{}
	dir, pkg, crdPath := "internal/controller", "controller", path.Join("..", "..", "config", "crd", "bases")
	if cfg.IsMultiGroup() && res.Group != "" {
		dir, pkg, crdPath = path.Join(dir, res.Group), res.PackageName(), path.Join("..", "..", "..", "config", "crd", "bases")
	}
	fileName := strings.ToLower(res.Kind) + "_controller.go"
	if controllerName != "" {
		fileName = resource.NormalizeFileName(controllerName) + "_controller.go"
	}
	controllerFile := path.Join(dir, fileName)
	generated, ok := u[controllerFile]
	if !ok {
		// --controller=false: go/v4 scaffolded the type only.
		return changed, nil
	}
	if scaffoldedByUs(generated) {
		return changed, nil // an earlier run's, maybe changed since: the user's
	}
	if res.Path == "" {
		return nil, fmt.Errorf("resource %s has no Go package (path): a multi-cluster controller needs one to watch the type", gvk)
	}
	data := apiData{
		Boilerplate:    boilerplate(u),
		Marker:         ownMarker,
		Package:        pkg,
		ImportAlias:    res.ImportAlias(),
		ImportPath:     res.Path,
		Kind:           res.Kind,
		ReconcilerName: resource.NormalizeReconcilerName(controllerName, res.Kind),
		ControllerName: resource.GetControllerName(controllerName, res.Kind, res.Group, cfg.IsMultiGroup()),
		RBAC:           rbacMarkerRE.FindAllString(generated, -1),
		DoAPI:          res.HasAPI(),
		CRDPath:        crdPath,
	}
	if changed[controllerFile], err = render("controller.go.tmpl", data); err != nil {
		return nil, err
	}

	testFile := path.Join(dir, strings.ToLower(res.Kind)+"_controller_test.go")
	if t, ok := u[testFile]; ok && !scaffoldedByUs(t) {
		if changed[testFile], err = render("controller_test.go.tmpl", data); err != nil {
			return nil, err
		}
	}

	suiteFile := path.Join(dir, "suite_test.go")
	if s, ok := u[suiteFile]; ok && !scaffoldedByUs(s) {
		if changed[suiteFile], err = suite(data, res); err != nil {
			return nil, err
		}
	}

	if changed[mainPath], err = wireReconcilers(main); err != nil {
		return nil, err
	}
	return changed, nil
}

// suite renders the suite with the scheme registration go/v4 inserts for
// the resource at the suite's markers (it inserts those of later resources
// itself).
func suite(data apiData, res resource.Resource) (string, error) {
	src, err := render("suite_test.go.tmpl", data)
	if err != nil {
		return "", err
	}
	if res.Path == "" {
		return src, nil
	}
	src = strings.Replace(src, "\t// +kubebuilder:scaffold:imports",
		fmt.Sprintf("\t%s %q\n\t// +kubebuilder:scaffold:imports", res.ImportAlias(), res.Path), 1)
	src = strings.Replace(src, "\t// +kubebuilder:scaffold:scheme",
		fmt.Sprintf("\terr = %s.AddToScheme(scheme.Scheme)\n\tExpect(err).NotTo(HaveOccurred())\n\n\t// +kubebuilder:scaffold:scheme", res.ImportAlias()), 1)
	b, err := format.Source([]byte(src))
	if err != nil {
		return "", fmt.Errorf("suite_test.go: %w", err)
	}
	return string(b), nil
}

// wireReconcilers rewrites go/v4's wiring of reconcilers in cmd/main.go for
// multi-cluster reconcilers, which take the Multi-Cluster Manager.
func wireReconcilers(main string) (string, error) {
	out := reconcilerSetupRE.ReplaceAllString(main, "(&$1.$2{\n\t\tManager: mgr,\n\t}).SetupWithManager(mgr)")
	b, err := format.Source([]byte(out))
	if err != nil {
		return "", fmt.Errorf("%s: %w", mainPath, err)
	}
	return string(b), nil
}
