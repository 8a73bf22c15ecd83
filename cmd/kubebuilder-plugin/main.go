package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/kubebuilder/v4/pkg/plugin"
	"sigs.k8s.io/kubebuilder/v4/pkg/plugin/external"
)

const (
	// PluginName is the plugin's name: its directory and executable under
	// $EXTERNAL_PLUGINS_PATH. On the command line, "multicluster" is enough.
	PluginName = "multicluster.mcruntime.io"
	// PluginVersion is the plugin's version: the directory between its name
	// and its executable.
	PluginVersion = "v1-alpha"

	// protocolVersion is the version of kubebuilder's PluginRequest and
	// PluginResponse this plugin speaks.
	protocolVersion = "v1alpha1"
)

func main() {
	if err := serve(os.Stdin, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, PluginName+":", err)
		os.Exit(1)
	}
}

// serve answers the one request kubebuilder writes to in with the response
// it reads from out. A failed subcommand is an answer too (Error and
// ErrorMsgs, which kubebuilder prints); only a request that cannot be read
// or a response that cannot be written is an error of serve. Run by hand
// with --help or --version, it says what it is instead.
func serve(in io.Reader, out io.Writer, args []string) error {
	for _, a := range args {
		switch a {
		case "--help", "-h", "help":
			_, err := fmt.Fprintf(out, "%s/%s is a kubebuilder plugin: run it through kubebuilder, e.g.\n%s", PluginName, PluginVersion, initExamples)
			return err
		case "--version", "version":
			_, err := fmt.Fprintf(out, "%s/%s (library %s)\n", PluginName, PluginVersion, defaultLibraryVersion())
			return err
		}
	}
	var req external.PluginRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("reading the plugin request from stdin: %w", err)
	}
	res := handle(req)
	if err := json.NewEncoder(out).Encode(res); err != nil {
		return fmt.Errorf("writing the plugin response: %w", err)
	}
	return nil
}

// handle runs one request: a subcommand, or one of the "flags" and
// "metadata" questions kubebuilder asks before it.
func handle(req external.PluginRequest) external.PluginResponse {
	res := external.PluginResponse{APIVersion: protocolVersion, Command: req.Command, Universe: map[string]string{}}
	var (
		changed map[string]string
		err     error
	)
	switch req.Command {
	case "flags":
		res.Flags = flagsFor(subcommandOf(req.Args))
		return res
	case "metadata":
		res.Metadata = metadataFor(subcommandOf(req.Args))
		return res
	case "init":
		changed, err = scaffoldInit(req)
	case "create api":
		changed, err = scaffoldAPI(req)
	case "create webhook":
		changed, err = scaffoldWebhook(req)
	default:
		err = fmt.Errorf("%s/%s does not support %q: it scaffolds init, create api and create webhook", PluginName, PluginVersion, req.Command)
	}
	if err != nil {
		res.Error = true
		res.ErrorMsgs = []string{fmt.Sprintf("%s %s: %v", PluginName, req.Command, err)}
		return res
	}
	// Kubebuilder writes every file of the response's universe: only the
	// files this plugin wrote or changed are in it.
	res.Universe = changed
	return res
}

// subcommandOf reads the subcommand of a flags or metadata request, which
// kubebuilder sends as its only argument ("--init", "--api", "--webhook").
func subcommandOf(args []string) string {
	for _, a := range args {
		if len(a) > 2 && a[:2] == "--" {
			return a[2:]
		}
	}
	return ""
}

// flagsFor lists the flags of a subcommand, so that kubebuilder checks them
// before it runs the chain.
func flagsFor(subcommand string) []external.Flag {
	if subcommand != "init" {
		return nil
	}
	return []external.Flag{
		{Name: flagLibraryVersion, Type: "string", Default: defaultLibraryVersion(),
			Usage: "version of github.com/mcruntime/multicluster-runtime (and its provider modules) the project requires"},
		{Name: flagLibraryDir, Type: "string",
			Usage: "directory of a multicluster-runtime checkout the project uses instead of the released modules (go.mod replace directives)"},
	}
}

const initExamples = `  kubebuilder init --plugins go/v4,multicluster/v1-alpha --domain example.com --repo example.com/fleet-operator
  kubebuilder create api --plugins go/v4,multicluster/v1-alpha --group fleet --version v1 --kind Guestbook
`

// metadataFor is the help kubebuilder shows for a subcommand with --help.
func metadataFor(subcommand string) plugin.SubcommandMetadata {
	switch subcommand {
	case "init":
		return plugin.SubcommandMetadata{
			Description: "Make the go/v4 project multi-cluster: cmd/main.go builds a Multi-Cluster Manager " +
				"(github.com/mcruntime/multicluster-runtime) over the provider chosen by --provider " +
				"(kubeconfig, file, cluster-api, cluster-inventory-api, namespace; see cmd/providers.go).",
			Examples: initExamples,
		}
	case "api":
		return plugin.SubcommandMetadata{
			Description: "Make the go/v4 controller a multi-cluster reconciler (mcbuilder, mcreconcile.Request, " +
				"mgr.GetCluster) tested on every member of a fleet of real control planes (pkg/fleettest).",
			Examples: initExamples,
		}
	case "webhook":
		return plugin.SubcommandMetadata{
			Description: "Wire the go/v4 webhook with the host cluster's manager (mgr.GetLocalManager()).",
			Examples:    "  kubebuilder create webhook --plugins go/v4,multicluster/v1-alpha --group fleet --version v1 --kind Guestbook --defaulting\n",
		}
	}
	return plugin.SubcommandMetadata{}
}
