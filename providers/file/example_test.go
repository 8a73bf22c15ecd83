package file_test

import (
	"fmt"
	"os"

	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// New reads every kubeconfig of a directory: each context of each file
// becomes a cluster named "<path>+<context>". Pass the provider to
// mcmanager.New, which runs it.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "fleet")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()

	provider, err := file.New(file.Options{
		KubeconfigDirs:  []string{dir},
		KubeconfigGlobs: []string{"*.kubeconfig"},
	})
	if err != nil {
		panic(err)
	}
	// mgr, err := mcmanager.New(hostConfig, provider, mcmanager.Options{})
	fmt.Println(provider.ClusterNames())
	// Output: []
}
