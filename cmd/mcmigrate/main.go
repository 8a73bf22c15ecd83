// Command mcmigrate moves a Go module written against the upstream design
// (sigs.k8s.io/multicluster-runtime) onto this library:
//
//	go run github.com/mcruntime/multicluster-runtime/cmd/mcmigrate@latest ./...
//
// run in the module's directory. It rewrites the module's go.mod requirement
// and every import path, type-checks the packages against this library
// (go/types, on the export data the go command builds) and rewrites every
// call the compiler refuses that has a mechanical replacement:
//
//   - x.String() on a multicluster.ClusterName becomes x (ClusterName is an
//     alias of string here),
//   - x.Empty() becomes x == "" (and !x.Empty() becomes x != ""),
//   - a call of this library's whose two arguments are the other way round
//     from its parameters (a cluster name and something else, as
//     mchandler.ForCluster(handler, name) against ForCluster(name, handler))
//     gets them swapped,
//   - a call of this library's that lacks only a leading context gets the
//     ctx in scope, and one that passes a context the function does not take
//     loses it.
//
// A dependency still built on upstream's module (a provider module of
// another project) gets go.mod's replace of that module by this
// repository's compatibility module of the same path, so that its types are
// this library's.
//
// What it cannot rewrite, it prints with the line of docs/migration.md that
// says what to write, and exits with status 1. -n prints what it would do
// and writes nothing.
//
// Until this library's release is on the module proxy, point the
// requirement at a checkout with -replace DIR.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	opts := Options{Dir: "."}
	flag.StringVar(&opts.Version, "version", DefaultVersion, "the version of "+LibraryModule+" to require")
	flag.StringVar(&opts.Replace, "replace", "", "a checkout of "+LibraryModule+" to replace it with in go.mod (until the version is released)")
	flag.BoolVar(&opts.DryRun, "n", false, "print what would change; write nothing")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: mcmigrate [flags] [packages] (default ./...)\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	opts.Patterns = flag.Args()
	rep, err := Migrate(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcmigrate:", err)
		os.Exit(2)
	}
	rep.Print(os.Stdout)
	if len(rep.Left) > 0 {
		os.Exit(1)
	}
}
