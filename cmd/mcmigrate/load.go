package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// find lists the module's packages and reads their files, imports not
// resolved (they are upstream's yet).
func (m *migration) find() error {
	// On a copy of the edited go.mod: resolving the packages' imports, which
	// are upstream's yet, may add requirements that are not to stay.
	findMod := filepath.Join(m.tmp, "find", "go.mod")
	if err := os.MkdirAll(filepath.Dir(findMod), 0o755); err != nil {
		return err
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		if data, err := os.ReadFile(filepath.Join(m.tmp, name)); err == nil {
			if err := os.WriteFile(filepath.Join(m.tmp, "find", name), data, 0o644); err != nil {
				return err
			}
		}
	}
	pkgs, err := m.listWith(findMod, append([]string{"list", "-e", "-find", "-json=ImportPath,Dir,GoFiles,TestGoFiles,XTestGoFiles,ForTest,Module"}, m.opts.Patterns...)...)
	if err != nil {
		return err
	}
	m.orig = map[string][]byte{}
	for _, p := range pkgs {
		if p.ForTest != "" || strings.HasSuffix(p.ImportPath, ".test") || p.Module == nil || !p.Module.Main {
			continue
		}
		abs := func(names []string) []string {
			var files []string
			for _, n := range names {
				files = append(files, filepath.Join(p.Dir, n))
			}
			return files
		}
		if files := abs(append(append([]string{}, p.GoFiles...), p.TestGoFiles...)); len(files) > 0 {
			m.units = append(m.units, &unit{path: p.ImportPath, files: files})
		}
		if len(p.XTestGoFiles) > 0 {
			m.units = append(m.units, &unit{path: p.ImportPath + "_test", files: abs(p.XTestGoFiles)})
		}
	}
	if len(m.units) == 0 {
		return fmt.Errorf("no package of the module matches %s", strings.Join(m.opts.Patterns, " "))
	}
	for _, u := range m.units {
		for _, f := range u.files {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			m.files = append(m.files, f)
			m.orig[f], m.src[f] = data, data
		}
	}
	return nil
}

func (m *migration) list(args ...string) ([]listed, error) {
	return m.listWith(filepath.Join(m.tmp, "go.mod"), args...)
}

func (m *migration) listWith(modFile string, args ...string) ([]listed, error) {
	cmd := m.goCmdWith(modFile, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// load builds the export data of the packages' dependencies, once, with
// the imports rewritten (an overlay: the files are not written yet), and
// orders the units as they depend on each other.
func (m *migration) load() error {
	overlay := struct{ Replace map[string]string }{Replace: map[string]string{}}
	for i, file := range m.files {
		tmp := filepath.Join(m.tmp, fmt.Sprintf("overlay%d.go", i))
		if err := os.WriteFile(tmp, m.src[file], 0o644); err != nil {
			return err
		}
		overlay.Replace[file] = tmp
	}
	data, err := json.Marshal(overlay)
	if err != nil {
		return err
	}
	overlayFile := filepath.Join(m.tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, data, 0o644); err != nil {
		return err
	}
	pkgs, err := m.list(append([]string{"list", "-e", "-mod=mod", "-overlay=" + overlayFile, "-export", "-deps", "-test", "-json=ImportPath,Dir,Export,ForTest,Module"}, m.opts.Patterns...)...)
	if err != nil {
		return err
	}
	m.exports = map[string]string{}
	order := map[string]int{}
	upstream := map[string]bool{}
	for i, p := range pkgs {
		if p.ForTest != "" || strings.HasSuffix(p.ImportPath, ".test") {
			continue
		}
		if p.Module != nil && p.Module.Main {
			order[p.ImportPath] = i
			continue
		}
		m.exports[p.ImportPath] = p.Export
		if p.Module != nil && underUpstream(p.Module.Path) && !compatPackage(p.Dir) {
			upstream[p.Module.Path] = true
		}
	}
	if len(upstream) > 0 {
		// A dependency built on upstream's module, which is not the
		// compatibility module: its types are not this library's.
		if m.compatReplaced {
			return fmt.Errorf("a dependency still builds on %s after its replace by the compatibility module", UpstreamModule)
		}
		if err := m.replaceByCompat(upstream); err != nil {
			return err
		}
		m.compatReplaced = true
		return m.load()
	}
	// go list -deps lists a package after its dependencies.
	sort.SliceStable(m.units, func(i, j int) bool {
		return order[strings.TrimSuffix(m.units[i].path, "_test")] < order[strings.TrimSuffix(m.units[j].path, "_test")]
	})
	m.imp = importer.ForCompiler(m.fset, "gc", func(path string) (io.ReadCloser, error) {
		file := m.exports[path]
		if file == "" {
			return nil, fmt.Errorf("no export data for %s (does it build?)", path)
		}
		return os.Open(file)
	})
	return nil
}

// check type-checks every unit from the current sources.
func (m *migration) check() error {
	checked := map[string]*types.Package{}
	for _, u := range m.units {
		u.ast, u.errs = nil, nil
		for _, file := range u.files {
			f, err := parser.ParseFile(m.fset, file, m.src[file], parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return fmt.Errorf("%w (a rewrite broke the file: report it)", err)
			}
			u.ast = append(u.ast, f)
		}
		u.info = &types.Info{
			Types:      map[ast.Expr]types.TypeAndValue{},
			Uses:       map[*ast.Ident]types.Object{},
			Defs:       map[*ast.Ident]types.Object{},
			Selections: map[*ast.SelectorExpr]*types.Selection{},
		}
		conf := types.Config{
			Importer: importerFunc(func(path string) (*types.Package, error) {
				if p, ok := checked[path]; ok {
					return p, nil
				}
				return m.imp.Import(path)
			}),
			Error: func(err error) {
				if te, ok := err.(types.Error); ok {
					u.errs = append(u.errs, te)
				}
			},
		}
		u.pkg, _ = conf.Check(strings.TrimSuffix(u.path, "_test"), m.fset, u.ast, u.info)
		if !strings.HasSuffix(u.path, "_test") {
			checked[u.path] = u.pkg
		}
	}
	return nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// underUpstream reports whether a module path is upstream's module or one of
// its provider modules.
func underUpstream(path string) bool {
	return path == UpstreamModule || strings.HasPrefix(path, UpstreamModule+"/")
}

// compatPackage reports whether the package in dir is one of the
// compatibility module's: generated, aliases of this library's.
func compatPackage(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "doc.go"))
	return err == nil && strings.HasPrefix(string(data), compatHeader)
}

// compatHeader starts the compatibility module's generated files.
const compatHeader = "// Code generated by gencompat"

// replaceByCompat points go.mod's requirement of each upstream module at
// the compatibility module of the same path: a checkout's (-replace) or
// this library's release's.
func (m *migration) replaceByCompat(modules map[string]bool) error {
	var paths []string
	for p := range modules {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var edits []string
	for _, p := range paths {
		sub := strings.TrimPrefix(p, UpstreamModule)
		target := LibraryModule + "/compat" + sub + "@" + m.opts.Version
		if m.opts.Replace != "" {
			dir, err := filepath.Abs(filepath.Join(m.opts.Replace, "compat", sub))
			if err != nil {
				return err
			}
			target = dir
		}
		edits = append(edits, "-replace="+p+"="+target)
		m.rep.GoMod = append(m.rep.GoMod, "a dependency builds on "+p+": replaced it with the compatibility module "+strings.Replace(target, "@", " ", 1))
	}
	modFile := filepath.Join(m.tmp, "go.mod")
	if out, err := m.goCmd(append(append([]string{"mod", "edit"}, edits...), modFile)...).CombinedOutput(); err != nil {
		return fmt.Errorf("go mod edit: %w: %s", err, out)
	}
	return nil
}
