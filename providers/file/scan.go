package file

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// wanted is one cluster found on disk.
type wanted struct {
	path    string
	context string
	hash    string
	config  *rest.Config
}

// scanResult is what one pass over the files found.
type scanResult struct {
	clusters map[multicluster.ClusterName]wanted
	// failed holds the files that exist but could not be read or parsed: the
	// clusters they served before are kept.
	failed map[string]error
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

// scan reads every file and resolves one rest.Config per context.
func (p *Provider) scan() (scanResult, error) {
	res := scanResult{clusters: map[multicluster.ClusterName]wanted{}, failed: map[string]error{}}
	files, err := p.files()
	for _, path := range files {
		found, ferr := p.load(path)
		if errors.Is(ferr, fs.ErrNotExist) {
			continue // deleted, or an explicit file that does not exist yet
		}
		if ferr != nil {
			res.failed[path] = ferr
		}
		for name, w := range found {
			res.clusters[name] = w
		}
	}
	return res, err
}

// load reads one kubeconfig file. A context that cannot be resolved is
// reported in the error while the file's other contexts are returned.
func (p *Provider) load(path string) (map[multicluster.ClusterName]wanted, error) {
	data, err := os.ReadFile(path)
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
	out := map[multicluster.ClusterName]wanted{}
	var errs []error
	contexts := make([]string, 0, len(cfg.Contexts))
	for name := range cfg.Contexts {
		contexts = append(contexts, name)
	}
	slices.Sort(contexts)
	for _, ctxName := range contexts {
		w, err := resolveContext(cfg, path, ctxName)
		if err != nil {
			errs = append(errs, fmt.Errorf("kubeconfig %q: context %q: %w", path, ctxName, redact.Error(err, data)))
			continue
		}
		out[p.clusterName(path, ctxName)] = w
	}
	return out, errors.Join(errs...)
}

func resolvePaths(cfg *clientcmdapi.Config, path string) error {
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	for _, c := range cfg.Clusters {
		if c.CertificateAuthority != "" && !filepath.IsAbs(c.CertificateAuthority) {
			c.CertificateAuthority = filepath.Join(base, c.CertificateAuthority)
		}
	}
	for _, a := range cfg.AuthInfos {
		for _, f := range []*string{&a.ClientCertificate, &a.ClientKey, &a.TokenFile} {
			if *f != "" && !filepath.IsAbs(*f) {
				*f = filepath.Join(base, *f)
			}
		}
	}
	return nil
}

// resolveContext builds the rest.Config of one context, and a hash of
// everything it depends on: the context, its cluster and its user.
func resolveContext(cfg *clientcmdapi.Config, path, ctxName string) (wanted, error) {
	kctx := cfg.Contexts[ctxName]
	mini := clientcmdapi.NewConfig()
	mini.CurrentContext = ctxName
	mini.Contexts[ctxName] = kctx
	if c, ok := cfg.Clusters[kctx.Cluster]; ok {
		mini.Clusters[kctx.Cluster] = c
	}
	if a, ok := cfg.AuthInfos[kctx.AuthInfo]; ok {
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
	sum := sha256.Sum256(serialized)
	return wanted{path: path, context: ctxName, hash: hex.EncodeToString(sum[:]), config: restCfg}, nil
}
