// Command dockerstandin answers, as the docker CLI would, the commands the
// kind library runs to list clusters and read their kubeconfigs, for
// "clusters" that are kubeconfig files in the directory $KIND_STANDIN_DIR:
// the file <name>.admin.conf is the cluster <name>, whose one node
// <name>-control-plane serves the API at the file's server address. The
// kind provider's tests build it as "docker", first on PATH, so that
// kind.New(kind.Options{}) runs its real path (runtime detection, listing by
// label, node roles, the admin kubeconfig read from the node, the API
// server's published port) against real control planes, without Docker.
//
// Any other command fails, naming itself: a kind library that starts to
// run more than this is noticed, not answered wrongly.
package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

const (
	clusterLabel = "io.x-k8s.kind.cluster"
	roleLabel    = "io.x-k8s.kind.role"
	nodeSuffix   = "-control-plane"
	confSuffix   = ".admin.conf"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "docker stand-in: %s: %v\n", strings.Join(os.Args[1:], " "), err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no command")
	}
	dir := os.Getenv("KIND_STANDIN_DIR")
	switch args[0] {
	case "-v", "--version":
		fmt.Println("Docker version 99.0.0, build standin")
		return nil
	case "ps":
		return ps(dir, flag(args, "--filter"), flag(args, "--format"))
	case "inspect":
		return inspect(dir, flag(args, "--format"), args[len(args)-1])
	case "exec":
		// exec --privileged [-i] [-e ENV]... NODE cat /etc/kubernetes/admin.conf
		n := len(args)
		if n < 3 || args[n-2] != "cat" || args[n-1] != "/etc/kubernetes/admin.conf" {
			return fmt.Errorf("only cat /etc/kubernetes/admin.conf is answered")
		}
		data, err := os.ReadFile(filepath.Join(dir, clusterOf(args[n-3])+confSuffix))
		if err != nil {
			return fmt.Errorf("no such container %s", args[n-3])
		}
		_, err = os.Stdout.Write(data)
		return err
	}
	return fmt.Errorf("unsupported command")
}

// flag returns the value after name in args.
func flag(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func clusters(dir string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*"+confSuffix))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range matches {
		names = append(names, strings.TrimSuffix(filepath.Base(m), confSuffix))
	}
	return names, nil
}

func clusterOf(node string) string { return strings.TrimSuffix(node, nodeSuffix) }

// ps lists the clusters (by their label) or a cluster's nodes (by name).
func ps(dir, filter, format string) error {
	names, err := clusters(dir)
	if err != nil {
		return err
	}
	switch {
	case filter == "label="+clusterLabel && format == fmt.Sprintf(`{{.Label "%s"}}`, clusterLabel):
		for _, n := range names {
			fmt.Println(n)
		}
		return nil
	case strings.HasPrefix(filter, "label="+clusterLabel+"=") && format == "{{.Names}}":
		want := strings.TrimPrefix(filter, "label="+clusterLabel+"=")
		if slices.Contains(names, want) {
			fmt.Println(want + nodeSuffix)
		}
		return nil
	}
	return fmt.Errorf("unsupported filter %q or format %q", filter, format)
}

// inspect answers a node's role and the API server's published address.
func inspect(dir, format, node string) error {
	conf := filepath.Join(dir, clusterOf(node)+confSuffix)
	if _, err := os.Stat(conf); err != nil {
		return fmt.Errorf("no such container %s", node)
	}
	switch {
	case strings.Contains(format, roleLabel):
		fmt.Println("control-plane")
		return nil
	case strings.Contains(format, "desktop.docker.io/ports/"):
		return nil // not Docker Desktop: the port is in NetworkSettings
	case strings.Contains(format, "NetworkSettings.Ports"):
		kc, err := clientcmd.LoadFromFile(conf)
		if err != nil {
			return err
		}
		for _, c := range kc.Clusters {
			u, err := url.Parse(c.Server)
			if err != nil {
				return err
			}
			fmt.Printf("%s\t%s\n", u.Hostname(), u.Port())
			return nil
		}
		return fmt.Errorf("%s has no cluster", conf)
	}
	return fmt.Errorf("unsupported format %q", format)
}
