package main

import (
	"bytes"
	"embed"
	"fmt"
	"go/format"
	"path"
	"runtime/debug"
	"strings"
	"text/template"

	"github.com/spf13/pflag"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
	"sigs.k8s.io/kubebuilder/v4/pkg/config"
	cfgv3 "sigs.k8s.io/kubebuilder/v4/pkg/config/v3"
	"sigs.k8s.io/yaml"
)

const (
	// LibraryModule is the module the scaffolded project builds on.
	LibraryModule = "github.com/mcruntime/multicluster-runtime"
	// ClusterAPIModule is the provider module of its own cmd/providers.go
	// imports (Cluster API's libraries are not in the root module).
	ClusterAPIModule = LibraryModule + "/providers/cluster-api"
	// pluginModule is this plugin's module: its version, when it was
	// installed at a release, is the library version it scaffolds.
	pluginModule = LibraryModule + "/cmd/kubebuilder-plugin"
	// fallbackLibraryVersion is the library version required when the plugin
	// was built from a checkout (its own version unknown).
	fallbackLibraryVersion = "v0.1.0"
	// minGoVersion is the go directive the library's go.mod has.
	minGoVersion = "1.26.0"

	flagLibraryVersion = "library-version"
	flagLibraryDir     = "library-dir"

	boilerplatePath = "hack/boilerplate.go.txt"
	mainPath        = "cmd/main.go"
	providersPath   = "cmd/providers.go"
	goModPath       = "go.mod"

	// ownMarker is in every Go file this plugin writes: a file that has it is
	// the user's to change and is never scaffolded again.
	ownMarker = "Scaffolded by " + PluginName
)

//go:embed templates/*.tmpl
var templates embed.FS

// defaultLibraryVersion is the version of this plugin when it was installed
// at a release (go install ...@vX: the library is released with it at that
// version), else fallbackLibraryVersion.
func defaultLibraryVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path == pluginModule && semver.IsValid(bi.Main.Version) {
		return bi.Main.Version
	}
	return fallbackLibraryVersion
}

// render executes the template file name with data and formats the result
// as Go source.
func render(name string, data any) (string, error) {
	text, err := renderText(name, data)
	if err != nil {
		return "", err
	}
	src, err := format.Source([]byte(text))
	if err != nil {
		return "", fmt.Errorf("template %s produced invalid Go: %w\n%s", name, err, text)
	}
	return string(src), nil
}

// renderText executes the template file name with data.
func renderText(name string, data any) (string, error) {
	t, err := template.New(name).Funcs(template.FuncMap{"lower": strings.ToLower}).ParseFS(templates, "templates/"+name)
	if err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	return buf.String(), nil
}

// boilerplate is the license header go/v4 puts on every Go file
// (hack/boilerplate.go.txt), followed by an empty line, or nothing.
func boilerplate(universe map[string]string) string {
	b := strings.TrimSpace(universe[boilerplatePath])
	if b == "" {
		return ""
	}
	return b + "\n\n"
}

// parseArgs parses the arguments kubebuilder passes on (every flag of the
// command line, for every plugin of the chain) into the flags this plugin
// reads; the other plugins' flags are skipped.
func parseArgs(args []string, define func(fs *pflag.FlagSet)) error {
	fs := pflag.NewFlagSet(PluginName, pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.SetOutput(&bytes.Buffer{})
	define(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parsing the arguments: %w", err)
	}
	return nil
}

// projectConfig reads the PROJECT file kubebuilder sends with the request.
func projectConfig(raw map[string]any) (config.Config, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("the request has no PROJECT configuration: run kubebuilder init first")
	}
	b, err := yaml.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("encoding the PROJECT configuration: %w", err)
	}
	cfg := cfgv3.New()
	if err := cfg.UnmarshalYAML(b); err != nil {
		return nil, fmt.Errorf("reading the PROJECT configuration: %w", err)
	}
	return cfg, nil
}

// requireLibrary makes go.mod require the library and its Cluster API
// provider at version, raises its go directive to the library's, and, when
// dir is set, replaces them with the checkout in dir.
func requireLibrary(gomod, version, dir string) (string, error) {
	f, err := modfile.Parse(goModPath, []byte(gomod), nil)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", goModPath, err)
	}
	if f.Go == nil || versionLess(f.Go.Version, minGoVersion) {
		if err := f.AddGoStmt(minGoVersion); err != nil {
			return "", fmt.Errorf("%s: setting go %s: %w", goModPath, minGoVersion, err)
		}
	}
	for _, mod := range []string{LibraryModule, ClusterAPIModule} {
		if err := f.AddRequire(mod, version); err != nil {
			return "", fmt.Errorf("%s: requiring %s %s: %w", goModPath, mod, version, err)
		}
	}
	if dir != "" {
		for mod, sub := range map[string]string{LibraryModule: "", ClusterAPIModule: "providers/cluster-api"} {
			if err := f.AddReplace(mod, "", path.Join(dir, sub), ""); err != nil {
				return "", fmt.Errorf("%s: replacing %s with %s: %w", goModPath, mod, dir, err)
			}
		}
	}
	f.Cleanup()
	b, err := f.Format()
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", goModPath, err)
	}
	return string(b), nil
}

// versionLess compares two go directive versions ("1.25", "1.26.0").
func versionLess(a, b string) bool {
	return semver.Compare("v"+a, "v"+b) < 0
}

// scaffoldedByUs tells whether a file was written by this plugin.
func scaffoldedByUs(content string) bool {
	return strings.Contains(content, ownMarker)
}
