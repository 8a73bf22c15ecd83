package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider          = &Provider{}
	_ multicluster.ProviderRunnable  = &Provider{}
	_ multicluster.ListingProvider   = &Provider{}
	_ mcmanager.ClusterHealthChecker = &Provider{}
)

const (
	// DefaultSeparator joins a file's path and a context name into a cluster name.
	DefaultSeparator = "+"
	// DefaultDebounce is how long the provider waits for a burst of file
	// system events to settle before re-reading the files.
	DefaultDebounce = 200 * time.Millisecond
	// maxDebounceFactor bounds a burst: its files are read at the latest this
	// many Debounce periods after its first event.
	maxDebounceFactor = 10
)

// PausedExtension is the name of a kubeconfig context extension that pauses
// the context's cluster when its value is "true" (the name of
// inventory.PausedAnnotation, the pause of every other inventory):
//
//	contexts:
//	- name: edge-17
//	  context:
//	    cluster: edge-17
//	    user: edge-17
//	    extensions:
//	    - name: multicluster-runtime.io/paused
//	      extension: "true"
//
// The cluster stays engaged and its caches keep running; controllers hold
// its requests until the extension is removed (or set to "false"), then
// reconcile each once (see mcmanager.ClusterPauser). Adding or removing it
// never rebuilds the cluster. Another value makes the context malformed: it
// is skipped and logged, and its cluster keeps its last good configuration
// and pause.
const PausedExtension = inventory.PausedAnnotation

// DefaultKubeconfigGlobs are the file name patterns read in
// Options.KubeconfigDirs when Options.KubeconfigGlobs is empty. Hidden files
// (names starting with ".") are never read.
var DefaultKubeconfigGlobs = []string{"*.kubeconfig", "*.yaml", "*.yml", "kubeconfig"}

// Options configure a Provider. The zero value reads $KUBECONFIG or
// ~/.kube/config.
type Options struct {
	// KubeconfigFiles are kubeconfig files to read. A file that does not exist
	// yet is read when it appears.
	KubeconfigFiles []string

	// KubeconfigDirs are directories whose files matching KubeconfigGlobs are
	// read. A directory that does not exist yet is read when it appears.
	KubeconfigDirs []string

	// KubeconfigGlobs are the file name patterns (filepath.Match syntax,
	// matched against the base name) read in KubeconfigDirs. Defaults to
	// DefaultKubeconfigGlobs.
	KubeconfigGlobs []string

	// Separator joins path and context in cluster names. Defaults to
	// DefaultSeparator.
	Separator string

	// ClusterName, if set, names the cluster of a context of a file, replacing
	// "<path><Separator><context>". It must return distinct, stable names.
	//
	// Whatever names the clusters, two contexts that map to the same name are
	// an error naming both sources, and neither is engaged under it (a
	// cluster already engaged keeps its configuration); names must pass
	// clusters.ValidateClusterName.
	ClusterName func(path, context string) multicluster.ClusterName

	// MaxKubeconfigSize bounds the size of a kubeconfig file in bytes; larger
	// files are skipped with a log line. Defaults to
	// clusters.DefaultMaxKubeconfigSize (1 MiB).
	MaxKubeconfigSize int

	// ClusterOptions are applied to every cluster the provider creates.
	ClusterOptions []cluster.Option
	// HealthCheck, if set, checks the health of each of the provider's
	// clusters on every probe, after /readyz and the manager's own check
	// (mcmanager.HealthOptions.Check): "this CRD is served", say. An error
	// counts as a failed probe. See mcmanager.ClusterHealthChecker.
	HealthCheck func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error

	// Debounce is how long a burst of file system events must be quiet before
	// the files are read again (at most ten times this after the burst's first
	// event). Defaults to DefaultDebounce.
	Debounce time.Duration
}

// Provider engages one cluster per context of every kubeconfig file it is
// configured with, and follows the files as they change. Create it with New;
// the Multi-Cluster Manager runs it. It is the inventory kit's listing mode
// (pkg/inventory) fed by a watch of the files: Start, RunOnce, Get,
// IndexField, ClusterNames, Listed and ClusterHealthCheck are the kit's.
type Provider struct {
	*inventory.Kit[client.Object]

	opts Options
	// paths holds the file each name of the last listing came from; only
	// the kit's listing goroutine touches it.
	paths map[multicluster.ClusterName]string
}

// New returns a provider for the files and directories in opts. With neither
// files nor directories it reads the files listed in $KUBECONFIG, or
// ~/.kube/config when $KUBECONFIG is empty.
func New(opts Options) (*Provider, error) {
	if len(opts.KubeconfigFiles) == 0 && len(opts.KubeconfigDirs) == 0 {
		files, err := defaultFiles()
		if err != nil {
			return nil, err
		}
		opts.KubeconfigFiles = files
	}
	if len(opts.KubeconfigGlobs) == 0 {
		opts.KubeconfigGlobs = DefaultKubeconfigGlobs
	}
	for _, g := range opts.KubeconfigGlobs {
		if _, err := filepath.Match(g, ""); err != nil {
			return nil, fmt.Errorf("file provider: glob %q: %w", g, err)
		}
	}
	if opts.Separator == "" {
		opts.Separator = DefaultSeparator
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.MaxKubeconfigSize <= 0 {
		opts.MaxKubeconfigSize = pkgclusters.DefaultMaxKubeconfigSize
	}
	opts.KubeconfigFiles = cleanAll(opts.KubeconfigFiles)
	opts.KubeconfigDirs = cleanAll(opts.KubeconfigDirs)

	p := &Provider{opts: opts, paths: map[multicluster.ClusterName]string{}}
	p.Kit = inventory.New(inventory.Options[client.Object]{
		Name: "file-provider", List: p.list, Watch: p.watch,
		ClusterOptions: opts.ClusterOptions, HealthCheck: opts.HealthCheck,
	})
	return p, nil
}

func defaultFiles() ([]string, error) {
	if env := os.Getenv("KUBECONFIG"); env != "" {
		var files []string
		for _, f := range filepath.SplitList(env) {
			if f != "" {
				files = append(files, f)
			}
		}
		if len(files) > 0 {
			return files, nil
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("file provider: no files or directories given, $KUBECONFIG is empty and the home directory is unknown: %w", err)
	}
	return []string{filepath.Join(home, ".kube", "config")}, nil
}

func cleanAll(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p != "" {
			out = append(out, filepath.Clean(p))
		}
	}
	return out
}

// clusterName names the cluster of one context of one file.
func (p *Provider) clusterName(path, context string) multicluster.ClusterName {
	if p.opts.ClusterName != nil {
		return p.opts.ClusterName(path, context)
	}
	return path + p.opts.Separator + context
}

// watch follows the files for the kit (inventory.Options.Watch): it asks
// for a listing once it watches them, then after each burst of file system
// events. Each event pushes the listing back by Debounce, but never beyond
// maxDebounceFactor*Debounce after the first event of a burst: files that
// change all the time must not starve the others.
func (p *Provider) watch(ctx context.Context, changed func()) error {
	log := logf.FromContext(ctx)
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("creating file watcher: %w", err)
	}
	defer func() { _ = watcher.Close() }()
	// Watch first, then list: whatever changes after this point produces an
	// event.
	watched := map[string]string{}
	p.updateWatches(log, watcher, watched)
	changed()

	timer := time.NewTimer(p.opts.Debounce)
	timer.Stop()
	defer timer.Stop()
	var burstStart time.Time
	schedule := func() {
		now := time.Now()
		if burstStart.IsZero() {
			burstStart = now
		}
		wait := p.opts.Debounce
		if deadline := burstStart.Add(maxDebounceFactor * p.opts.Debounce); now.Add(wait).After(deadline) {
			wait = max(deadline.Sub(now), 0)
		}
		timer.Reset(wait)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-watcher.Events:
			if !ok {
				return errors.New("file watcher closed")
			}
			schedule()
		case err, ok := <-watcher.Errors:
			if !ok {
				return errors.New("file watcher closed")
			}
			// An overflow loses events: read everything again.
			log.Error(err, "File watcher error, re-reading kubeconfig files")
			schedule()
		case <-timer.C:
			burstStart = time.Time{}
			p.updateWatches(log, watcher, watched)
			changed()
		}
	}
}

// updateWatches watches every configured directory and the directory of every
// configured file, or their nearest existing ancestor while they do not exist,
// and the directory holding each symlink on their paths: a directory that is
// a symlink swapped to another target (ln -s new tmp; mv -T tmp dir) changes
// nothing in the directory watched, only in the one that holds the link. A
// watch follows the link's target when it is added, so a directory whose
// target changed is watched again. watched holds what each watched path
// resolved to; only the watch goroutine touches it.
func (p *Provider) updateWatches(log logr.Logger, watcher *fsnotify.Watcher, watched map[string]string) {
	dirs := slices.Clone(p.opts.KubeconfigDirs)
	for _, f := range p.opts.KubeconfigFiles {
		dirs = append(dirs, filepath.Dir(f))
	}
	// A directory created between finding the nearest existing one and
	// watching it would go unnoticed, and so would every file written into
	// it: look again after adding the watches, until nothing moved.
	want := map[string]bool{}
	for moved, round := true, 0; moved && round < 10; round++ {
		moved = false
		for _, dir := range dirs {
			for _, near := range append(linkHolders(dir), nearestDir(dir)) {
				if want[near] {
					continue
				}
				want[near], moved = true, true
				target, _ := filepath.EvalSymlinks(near)
				if old, ok := watched[near]; ok && old != target {
					_ = watcher.Remove(near) // watching the link's old target
				}
				watched[near] = target
				if err := watcher.Add(near); err != nil {
					log.Error(err, "Failed to watch directory; changes in it are seen on the next event", "directory", near)
				}
			}
		}
	}
	for _, dir := range watcher.WatchList() {
		if !want[dir] {
			_ = watcher.Remove(dir)
			delete(watched, dir)
		}
	}
}

// linkHolders returns the directory holding each symlink among dir and its
// ancestors.
func linkHolders(dir string) []string {
	var out []string
	for {
		parent := filepath.Dir(dir)
		if parent == dir {
			return out
		}
		if st, err := os.Lstat(dir); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			out = append(out, nearestDir(parent))
		}
		dir = parent
	}
}

// nearestDir returns dir if it is an existing directory, else its nearest
// existing ancestor.
func nearestDir(dir string) string {
	for {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dir
		}
		dir = parent
	}
}
