package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// wanted is one context found on disk.
type wanted struct {
	inventory.Desired
	path, context string
}

// source names where a cluster comes from, for log lines.
func (w wanted) source() string {
	return fmt.Sprintf("file %q context %q", w.path, w.context)
}

// list reads every file, for the kit (inventory.Options.List): one Desired
// per context. What cannot be read is logged, counted and keeps its
// clusters: each name that a file that failed, or any file while a
// directory could not be listed, gave last time is listed without a
// Config, which keeps its cluster as it is. A name that several contexts
// map to is listed once, without a Config: none of them is engaged under
// it (which one the user meant, the files cannot tell), and a cluster
// engaged under it keeps its configuration.
func (p *Provider) list(ctx context.Context) ([]inventory.Desired, error) {
	log := logf.FromContext(ctx)
	files, listErr := p.files()
	if listErr != nil {
		log.Error(listErr, "Failed to list kubeconfig files; keeping the clusters found before")
	}
	found := map[multicluster.ClusterName]wanted{}
	conflicts := map[multicluster.ClusterName][]string{}
	failed := map[string]bool{}
	for _, path := range files {
		contexts, err := p.load(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted, or an explicit file that does not exist yet
		}
		if err != nil {
			failed[path] = true
			skipped.WithLabelValues(skipReason(err)).Inc()
			log.Error(err, "Skipping unreadable or malformed kubeconfig; its clusters keep their last good configuration", "file", path)
		}
		for _, w := range contexts {
			if other, dup := found[w.Name]; dup {
				conflicts[w.Name] = []string{other.source()}
				delete(found, w.Name)
			}
			if sources, dup := conflicts[w.Name]; dup {
				conflicts[w.Name] = append(sources, w.source())
				continue
			}
			found[w.Name] = w
		}
	}
	last := p.paths
	p.paths = map[multicluster.ClusterName]string{}
	desired := make([]inventory.Desired, 0, len(found)+len(conflicts))
	for name, w := range found {
		desired = append(desired, w.Desired)
		p.paths[name] = w.path
	}
	for name, sources := range conflicts {
		skipped.WithLabelValues(skipNameConflict).Inc()
		log.Error(fmt.Errorf("cluster name %q comes from %s", name, strings.Join(sources, " and ")),
			"Skipping a cluster name that several kubeconfig contexts map to; give them distinct names (Options.ClusterName)", "cluster", name)
		desired = append(desired, inventory.Desired{Name: name})
		p.paths[name] = last[name]
	}
	for name, path := range last {
		if _, listed := p.paths[name]; !listed && (listErr != nil || failed[path]) {
			desired = append(desired, inventory.Desired{Name: name})
			p.paths[name] = path
		}
	}
	slices.SortFunc(desired, func(a, b inventory.Desired) int { return strings.Compare(a.Name, b.Name) })
	return desired, nil
}

// files lists the kubeconfig files to read now, in a stable order.
func (p *Provider) files() ([]string, error) {
	out := slices.Clone(p.opts.KubeconfigFiles)
	var errs []error
	for _, dir := range p.opts.KubeconfigDirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // picked up when it appears
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading directory %q: %w", dir, err))
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") || !p.matches(e.Name()) {
				continue
			}
			path := filepath.Join(dir, e.Name())
			// Follow symlinks (Kubernetes volumes link into ..data): only regular files count.
			if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
				continue
			}
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), errors.Join(errs...)
}

func (p *Provider) matches(base string) bool {
	for _, g := range p.opts.KubeconfigGlobs {
		if ok, _ := filepath.Match(g, base); ok {
			return true
		}
	}
	return false
}

var (
	errNotRegular = errors.New("not a regular file")
	errTooLarge   = errors.New("kubeconfig too large")
)

// Reasons of multicluster_file_provider_skipped_total.
const (
	skipNotRegular   = "not-regular"
	skipTooLarge     = "too-large"
	skipInvalidName  = "invalid-name"
	skipNameConflict = "name-conflict"
	skipUnreadable   = "unreadable-or-malformed"
)

// skipped counts what the provider skips, each time it reads the files.
var skipped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "multicluster_file_provider_skipped_total",
	Help: "Kubeconfig files or contexts the file provider skipped while reading its files, by reason.",
}, []string{"reason"})

func init() { metrics.Registry.MustRegister(skipped) }

// skipReason classifies why a file (or some of its contexts) was skipped.
func skipReason(err error) string {
	switch {
	case errors.Is(err, errNotRegular):
		return skipNotRegular
	case errors.Is(err, errTooLarge):
		return skipTooLarge
	case errors.Is(err, pkgclusters.ErrInvalidClusterName):
		return skipInvalidName
	}
	return skipUnreadable
}

// readKubeconfig reads a kubeconfig file without ever blocking on it: a FIFO
// or device listed by path is refused instead of read, and so is a file
// larger than limit bytes.
func readKubeconfig(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s), skipped", errNotRegular, st.Mode().Type())
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than the limit of %d, skipped", errTooLarge, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: more than the limit of %d bytes, skipped", errTooLarge, limit)
	}
	return data, nil
}

// load reads one kubeconfig file, in context order. A context that cannot be
// resolved is reported in the error while the file's other contexts are
// returned.
func (p *Provider) load(path string) ([]wanted, error) {
	data, err := readKubeconfig(path, int64(p.opts.MaxKubeconfigSize))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("kubeconfig %q: %w", path, err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %q: %w", path, redact.Error(err, data))
	}
	// Relative certificate and key paths are relative to the file.
	if err := resolvePaths(cfg, path); err != nil {
		return nil, fmt.Errorf("kubeconfig %q: %w", path, err)
	}
	var out []wanted
	var errs []error
	contexts := make([]string, 0, len(cfg.Contexts))
	for name := range cfg.Contexts {
		contexts = append(contexts, name)
	}
	slices.Sort(contexts)
	for _, ctxName := range contexts {
		w, err := resolveContext(cfg, path, ctxName)
		// The context's name, and what client-go's error quotes of the
		// file, are the file writer's: both are bounded.
		if err != nil {
			errs = append(errs, fmt.Errorf("kubeconfig %q: context %q: %w", path, redact.Value(ctxName), redact.Bounded(redact.Error(err, data))))
			continue
		}
		name := p.clusterName(path, ctxName)
		if err := pkgclusters.ValidateClusterName(name); err != nil {
			errs = append(errs, fmt.Errorf("kubeconfig %q: context %q: %w", path, redact.Value(ctxName), err))
			continue
		}
		w.Name = name
		out = append(out, w)
	}
	return out, errors.Join(errs...)
}

// resolvePaths makes the kubeconfig's file references absolute, relative to
// the kubeconfig's directory, as kubectl does: certificate, key, token and CA
// files, and an exec plugin command given as a path (one that contains a
// separator; a bare name is looked up in $PATH).
func resolvePaths(cfg *clientcmdapi.Config, path string) error {
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	var refs []*string
	for _, c := range cfg.Clusters {
		refs = append(refs, clientcmd.GetClusterFileReferences(c)...)
	}
	for _, a := range cfg.AuthInfos {
		refs = append(refs, clientcmd.GetAuthInfoFileReferences(a)...)
	}
	for _, f := range refs {
		if *f != "" && !filepath.IsAbs(*f) {
			*f = filepath.Join(base, *f)
		}
	}
	return nil
}

// execAPIVersions are the exec credential API versions client-go speaks.
var execAPIVersions = []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}

// resolveContext builds the rest.Config of one context, and a hash of
// everything it depends on: the context, its cluster and its user.
func resolveContext(cfg *clientcmdapi.Config, path, ctxName string) (wanted, error) {
	kctx, paused, err := withoutPause(cfg.Contexts[ctxName])
	if err != nil {
		return wanted{}, err
	}
	mini := clientcmdapi.NewConfig()
	mini.CurrentContext = ctxName
	mini.Contexts[ctxName] = kctx
	if c, ok := cfg.Clusters[kctx.Cluster]; ok {
		mini.Clusters[kctx.Cluster] = c
	}
	if a, ok := cfg.AuthInfos[kctx.AuthInfo]; ok {
		// client-go quotes an unknown exec apiVersion in the error it
		// returns when the cluster is built, past the redaction of this
		// file's errors: refuse it here, naming the field only.
		if a.Exec != nil && !slices.Contains(execAPIVersions, a.Exec.APIVersion) {
			return wanted{}, fmt.Errorf("user exec apiVersion is not one of %v", execAPIVersions)
		}
		mini.AuthInfos[kctx.AuthInfo] = a
	}
	restCfg, err := clientcmd.NewNonInteractiveClientConfig(*mini, ctxName, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return wanted{}, err
	}
	serialized, err := clientcmd.Write(*mini)
	if err != nil {
		return wanted{}, fmt.Errorf("hashing: %w", err)
	}
	return wanted{path: path, context: ctxName, Desired: inventory.Desired{
		Config: restCfg, Hash: inventory.Hash(serialized), Paused: paused,
		LogValues: []any{"file", path, "context", ctxName},
	}}, nil
}

// withoutPause reads the context's PausedExtension and returns a copy of the
// context without it, so that pausing or resuming changes nothing the
// cluster is built from (its hash).
func withoutPause(kctx *clientcmdapi.Context) (*clientcmdapi.Context, bool, error) {
	ext, ok := kctx.Extensions[PausedExtension]
	if !ok {
		return kctx, false, nil
	}
	// The JSON of an extension as clientcmd loaded it (one without
	// apiVersion and kind stays raw, a runtime.Unknown), compacted.
	raw, _ := json.Marshal(ext)
	var paused bool
	switch string(raw) {
	case `"true"`, "true":
		paused = true
	case `"false"`, "false":
	default:
		return nil, false, fmt.Errorf(`context extension %s is %s: want "true" or "false"`, PausedExtension, redact.Value(string(raw)))
	}
	c := *kctx
	c.Extensions = maps.Clone(kctx.Extensions)
	delete(c.Extensions, PausedExtension)
	return &c, paused, nil
}
