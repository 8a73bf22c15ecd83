// Command gencompat writes the packages of the compatibility module
// (sigs.k8s.io/multicluster-runtime, the directory compat/ of this
// repository) from the exported API of github.com/mcruntime/multicluster-runtime:
// for every public package of the library, a package at upstream's import
// path whose every name is an alias of the library's (types), a copy of it
// (constants, variables) or a function forwarding to it.
//
// Run it through `go generate ./...` in compat/. TestGeneratedFilesAreCurrent
// fails when the checked-in files differ from what it writes.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "", "the compatibility module's directory (default: the module containing the working directory)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gencompat:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	compatDir, err := findCompatDir()
	if err != nil {
		return err
	}
	if out == "" {
		out = compatDir
	}
	files, err := Generate(compatDir)
	if err != nil {
		return err
	}
	return Write(out, files)
}
