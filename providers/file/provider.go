package file

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
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
// the Multi-Cluster Manager runs it.
type Provider struct {
	pkgclusters.View // Get, IndexField, ClusterNames

	opts     Options
	absRefs  []string // absolute configured files and directories, for event filtering
	absFiles []string // absolute configured files
	members  pkgclusters.Members

	listed chan struct{} // closed once the files were read at start-up

	mu      sync.Mutex
	started bool
	paths   map[multicluster.ClusterName]string // the file each engaged cluster comes from
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

	p := &Provider{opts: opts, paths: map[multicluster.ClusterName]string{}, listed: make(chan struct{})}
	for _, path := range append(slices.Clone(opts.KubeconfigFiles), opts.KubeconfigDirs...) {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("file provider: %q: %w", path, err)
		}
		p.absRefs = append(p.absRefs, abs)
	}
	for _, path := range opts.KubeconfigFiles {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("file provider: %q: %w", path, err)
		}
		p.absFiles = append(p.absFiles, abs)
	}
	p.members = pkgclusters.Members{ClusterOptions: opts.ClusterOptions}
	p.View = p.members.View()
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

// ClusterHealthCheck returns Options.HealthCheck, which the manager runs on
// every probe of the provider's clusters (mcmanager.ClusterHealthChecker).
func (p *Provider) ClusterHealthCheck() func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	return p.opts.HealthCheck
}

// Listed is closed once Start has read the files and published every cluster
// found in them (multicluster.ListingProvider): the manager's readiness check
// waits for it.
func (p *Provider) Listed() <-chan struct{} { return p.listed }

var _ multicluster.ListingProvider = &Provider{}

// Start engages the clusters of the files, then follows the files until ctx
// ends. Clusters are disengaged when it returns.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	log, err := p.begin(ctx)
	if err != nil {
		return err
	}
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file provider: creating file watcher: %w", err)
	}
	defer func() { _ = watcher.Close() }()

	runCtx, cancel := context.WithCancel(ctx)
	defer p.members.Wait()
	defer cancel()
	// A cluster that rejects its credentials: read the files again at once.
	refresh := make(chan struct{}, 1)
	p.members.Refresh = func(multicluster.ClusterName) {
		select {
		case refresh <- struct{}{}:
		default:
		}
	}
	p.members.Start(runCtx, aware, log)

	p.sync(log, watcher)
	close(p.listed)

	// Each event pushes the re-read back by Debounce, but never beyond
	// maxDebounceFactor*Debounce after the first event of a burst: files that
	// change all the time must not starve the others.
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
		case ev, ok := <-watcher.Events:
			if !ok {
				return errors.New("file provider: file watcher closed")
			}
			if p.relevant(ev.Name) {
				schedule()
			}
		case err, ok := <-watcher.Errors:
			if !ok {
				return errors.New("file provider: file watcher closed")
			}
			// An overflow loses events: read everything again.
			log.Error(err, "File watcher error, re-reading kubeconfig files")
			schedule()
		case <-refresh:
			schedule()
		case <-timer.C:
			burstStart = time.Time{}
			p.sync(log, watcher)
		}
	}
}

// sync re-reads every file and applies the difference to the engaged clusters.
func (p *Provider) sync(log logr.Logger, watcher *fsnotify.Watcher) {
	// Watch first: whatever changes after this point produces an event.
	p.updateWatches(log, watcher)
	p.read(log)
}

// read reads every file and applies the difference to the engaged clusters.
func (p *Provider) read(log logr.Logger) {
	res, listErr := p.scan()
	if listErr != nil {
		log.Error(listErr, "Failed to list kubeconfig files; keeping the clusters found before")
	}
	for path, err := range res.failed {
		skipped.WithLabelValues(skipReason(err)).Inc()
		log.Error(err, "Skipping unreadable or malformed kubeconfig; its clusters keep their last good configuration", "file", path)
	}
	for name, sources := range res.conflicts {
		skipped.WithLabelValues(skipNameConflict).Inc()
		log.Error(fmt.Errorf("cluster name %q comes from %s", name, strings.Join(sources, " and ")),
			"Skipping a cluster name that several kubeconfig contexts map to; give them distinct names (Options.ClusterName)", "cluster", name)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if listErr == nil {
		for _, name := range p.members.Names() {
			if _, ok := res.clusters[name]; ok {
				continue
			}
			if _, failed := res.failed[p.paths[name]]; failed {
				continue
			}
			if _, conflict := res.conflicts[name]; conflict {
				continue
			}
			if p.members.Remove(name) {
				log.Info("Disengaged cluster: its file or context is gone", "cluster", name, "file", p.paths[name])
			}
			delete(p.paths, name)
		}
	}
	names := make([]multicluster.ClusterName, 0, len(res.clusters))
	for name := range res.clusters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		w := res.clusters[name]
		p.paths[name] = w.path
		switch replaced, changed := p.members.Set(name, w.hash, w.config, nil, pkgclusters.SetPaused(w.paused)); {
		case !changed:
		case replaced:
			log.Info("Re-creating cluster: its configuration changed", "cluster", name, "file", w.path, "context", w.context)
		default:
			log.Info("Engaging cluster", "cluster", name, "file", w.path, "context", w.context)
		}
	}
}

// updateWatches watches every configured directory and the directory of every
// configured file, or their nearest existing ancestor while they do not exist.
func (p *Provider) updateWatches(log logr.Logger, watcher *fsnotify.Watcher) {
	wanted := func() map[string]bool {
		want := map[string]bool{}
		for _, f := range p.opts.KubeconfigFiles {
			want[nearestDir(filepath.Dir(f))] = true
		}
		for _, d := range p.opts.KubeconfigDirs {
			want[nearestDir(d)] = true
		}
		return want
	}
	// A directory created between finding the nearest existing one and
	// watching it would go unnoticed, and so would every file written into
	// it: look again after adding the watches, until nothing moved.
	want := wanted()
	for range 10 {
		have := map[string]bool{}
		for _, w := range watcher.WatchList() {
			have[w] = true
		}
		for dir := range want {
			if have[dir] {
				continue
			}
			if err := watcher.Add(dir); err != nil {
				log.Error(err, "Failed to watch directory; changes in it are seen on the next event", "directory", dir)
			}
		}
		again := wanted()
		if maps.Equal(again, want) {
			break
		}
		want = again
	}
	for _, dir := range watcher.WatchList() {
		if !want[dir] {
			_ = watcher.Remove(dir)
		}
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

// relevant reports whether an event on path may change what the provider
// reads: a configured file or anything in a configured directory, or an
// ancestor of one of them being created, renamed or removed.
func (p *Provider) relevant(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return true
	}
	for _, ref := range p.absRefs {
		if abs == ref || filepath.Dir(abs) == ref || isAncestor(abs, ref) {
			return true
		}
	}
	// A configured file may be a symlink into a directory that its own
	// directory swaps atomically, as the kubelet updates Secret and ConfigMap
	// volumes (name -> ..data/name, ..data -> ..<timestamp>): the event is on
	// ..data, not on the file. Anything in a configured file's directory is
	// read again; the content hash decides whether a cluster changed.
	for _, f := range p.absFiles {
		if filepath.Dir(abs) == filepath.Dir(f) {
			return true
		}
	}
	return false
}

func isAncestor(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}
