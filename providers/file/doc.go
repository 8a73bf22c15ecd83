// Package file provides a multicluster.Provider that discovers clusters from
// kubeconfig files on disk.
//
// Every context of every kubeconfig file becomes a cluster named
// "<path><separator><context>" (separator "+" by default), for example
// "/etc/fleet/prod.kubeconfig+eu-west". Files come from three places:
//
//   - Options.KubeconfigFiles: explicit files;
//   - Options.KubeconfigDirs: every regular, non-hidden file of these
//     directories whose name matches one of Options.KubeconfigGlobs
//     (DefaultKubeconfigGlobs unless set);
//   - with neither files nor directories: the files in $KUBECONFIG (split on
//     the OS list separator, ":" on Unix) or, when it is unset, ~/.kube/config.
//
// The provider watches its files and directories with fsnotify. Bursts of
// writes (editors, atomic renames, Kubernetes volume updates) are coalesced
// for Options.Debounce, then the provider re-reads everything and applies the
// difference:
//
//   - a new file or context engages its clusters;
//   - a changed file re-creates only the clusters whose resolved configuration
//     (the context, its cluster and its user, compared by hash) changed, but
//     a change of a user's token, basic credentials or embedded client
//     certificate and key alone rotates them in the running cluster
//     (clusters.Members.Set); files
//     a kubeconfig refers to (certificate-authority, client-certificate, ...)
//     are compared by path, and relative paths are resolved against the
//     kubeconfig's directory;
//   - a deleted file or context disengages its clusters;
//   - a directory or file that does not exist yet is picked up when it appears
//     (its nearest existing ancestor is watched meanwhile).
//
// A file that cannot be read or parsed is logged, naming the file, and
// skipped; clusters it served before keep running with their last good
// configuration, and other files are unaffected. A cluster that cannot be
// reached is retried with exponential backoff without delaying the others.
// Credentials never appear in logs or errors.
//
// Kubeconfig files are chosen by the operator and trusted as kubectl trusts
// them: exec plugins run and local files are read. Still, a file that is not a
// regular file (a FIFO or a device listed by path) or that is larger than
// Options.MaxKubeconfigSize (1 MiB by default) is skipped with a log line,
// and nothing the provider reads can block it. Cluster names must pass
// clusters.ValidateClusterName (no control characters, bounded length), and
// two contexts that map to the same name are an error naming both: neither is
// engaged under it.
//
// A file listed by path may be a symlink that the kubelet updates by swapping
// its directory's ..data link (Secret and ConfigMap volumes): any change in a
// listed file's directory makes the provider read it again. A directory may
// be a symlink swapped to another target (a deployment's "current" link, or a
// Secret volume's subdirectory, itself a link into ..data): the directory
// holding each symlink on a listed path is watched as well, and the new
// target is read and watched once the link is swapped.
//
// The provider is the inventory kit's listing mode (pkg/inventory) fed by its
// watch: the files are listed again after each burst of events (and at once
// when a cluster rejects its credentials), and the kit publishes what they
// name, withdraws what they no longer name and closes Listed after the first
// listing. The cluster lifecycle (build, start, indexes, cache sync,
// engagement, probes, replacement, teardown) is the fleet engine's, and every
// cluster is built and started on its own.
package file
