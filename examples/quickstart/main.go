// Command quickstart is a multi-cluster ConfigMap controller over a fleet of
// clusters described by kubeconfig files (the file provider): it prints a
// line when a cluster joins or leaves the fleet and when a ConfigMap of any
// cluster is reconciled. It only reads.
//
// Against your clusters:
//
//	go run ./examples/quickstart -kubeconfig-dir ~/fleet/ -kubeconfig-file ~/.kube/dev.yaml
//
// Without -kubeconfig-dir and -kubeconfig-file it reads $KUBECONFIG (or
// ~/.kube/config). The host cluster, which the manager itself runs against,
// comes from -host-kubeconfig, else from the usual places ($KUBECONFIG,
// ~/.kube/config, in-cluster). Stop it with Ctrl-C; it prints a summary.
//
// With -demo (what `make demo` runs) it starts its own local fleet of real
// control planes, adds and removes clusters while the controller runs, prints
// a summary and stops by itself, leaving nothing behind.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	silenceLibraryLogs()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	var files, dirs listFlag
	demo := fs.Bool("demo", false, "start a local fleet of control planes and run a scripted scenario")
	fs.Var(&files, "kubeconfig-file", "kubeconfig file; every context is a cluster (repeatable)")
	fs.Var(&dirs, "kubeconfig-dir", "directory of kubeconfig files (*.kubeconfig, *.yaml, *.yml, kubeconfig) (repeatable)")
	hostKubeconfig := fs.String("host-kubeconfig", "", "kubeconfig of the host cluster the manager runs against")
	if err := fs.Parse(args); err != nil {
		return err
	}

	if *demo {
		s, err := runDemo(ctx, out)
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			fmt.Fprintln(out, "interrupted")
			err = nil
		}
		fmt.Fprintln(out, s)
		return err
	}
	var host *rest.Config
	var err error
	if *hostKubeconfig != "" {
		host, err = clientcmd.BuildConfigFromFlags("", *hostKubeconfig)
	} else {
		host, err = ctrl.GetConfig()
	}
	if err != nil {
		return fmt.Errorf("host cluster: %w", err)
	}
	rep := newReporter(out)
	err = runController(ctx, host, file.Options{KubeconfigFiles: files, KubeconfigDirs: dirs}, rep)
	fmt.Fprintln(out, rep.finish())
	return err
}

// rerunInProcess lets the tests run the controller several times in one
// process, which controller-runtime's controller name check forbids otherwise.
var rerunInProcess bool

// runController runs the quickstart controller with a file provider until
// ctx ends.
func runController(ctx context.Context, host *rest.Config, opts file.Options, rep *reporter) error {
	opts.ClusterName = clusterName
	// snippet:quickstart-manager
	provider, err := file.New(opts)
	if err != nil {
		return err
	}
	mgr, err := mcmanager.New(host, provider, mcmanager.Options{
		Metrics:    server.Options{BindAddress: "0"}, // no metrics endpoint for a demo
		Controller: config.Controller{SkipNameValidation: &rerunInProcess},
	})
	if err != nil {
		return err
	}
	if err := setupController(mgr, rep); err != nil {
		return err
	}
	return mgr.Start(ctx)
	// end-snippet
}

// silenceLibraryLogs keeps controller-runtime's and client-go's own logging
// out of the quickstart's output.
func silenceLibraryLogs() {
	logf.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
}
