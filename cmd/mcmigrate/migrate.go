package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The module paths.
const (
	UpstreamModule = "sigs.k8s.io/multicluster-runtime"
	LibraryModule  = "github.com/mcruntime/multicluster-runtime"
	// DefaultVersion is the version of this library -version defaults to.
	DefaultVersion = "v0.1.0"
)

// separateModules are this library's packages that are modules of their
// own: a requirement of upstream's module of the same path moves to it.
var separateModules = []string{"/providers/kind", "/providers/cluster-api"}

// Options configure a migration.
type Options struct {
	// Dir is the directory of the module to migrate (its go.mod's).
	Dir string
	// Patterns are the packages to migrate; default ./...
	Patterns []string
	// Version of LibraryModule to require; default DefaultVersion.
	Version string
	// Replace, if set, is a checkout of LibraryModule that go.mod replaces
	// it with (its separate modules too).
	Replace string
	// DryRun reports and writes nothing.
	DryRun bool
	// Env is added to the go command's environment.
	Env []string
}

// Report is what a migration did and left.
type Report struct {
	GoMod     []string // the changes to go.mod
	Imports   int      // import paths rewritten
	Rewritten []Item   // calls rewritten
	Left      []Item   // what the compiler still refuses
}

// Item is one place in the program.
type Item struct {
	Pos     token.Position
	What    string // the rewrite, or the compiler's error
	Page    string // the line of docs/migration.md for it, "" if none
	PageRef int    // its line number
}

// Print writes the report for a person.
func (r *Report) Print(w io.Writer) {
	for _, c := range r.GoMod {
		fmt.Fprintf(w, "go.mod: %s\n", c)
	}
	fmt.Fprintf(w, "%d import paths rewritten, %d calls rewritten, %d left to do by hand\n", r.Imports, len(r.Rewritten), len(r.Left))
	for _, it := range r.Rewritten {
		fmt.Fprintf(w, "%s: rewrote %s\n", it.Pos, it.What)
	}
	for _, it := range r.Left {
		fmt.Fprintf(w, "%s: %s\n", it.Pos, it.What)
		if it.Page != "" {
			fmt.Fprintf(w, "\tdocs/migration.md:%d: %s\n", it.PageRef, it.Page)
		} else {
			fmt.Fprintf(w, "\tdocs/migration.md: no line names it; see the page's tables\n")
		}
	}
}

// Migrate migrates the module in opts.Dir.
func Migrate(opts Options) (*Report, error) {
	if opts.Version == "" {
		opts.Version = DefaultVersion
	}
	if len(opts.Patterns) == 0 {
		opts.Patterns = []string{"./..."}
	}
	rep := &Report{}
	tmp, err := os.MkdirTemp("", "mcmigrate")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	m := &migration{opts: opts, rep: rep, fset: token.NewFileSet(), src: map[string][]byte{}, tmp: tmp}
	if err := m.goMod(); err != nil {
		return nil, err
	}
	if err := m.find(); err != nil {
		return nil, err
	}
	if err := m.rewriteImports(); err != nil {
		return nil, err
	}
	if err := m.load(); err != nil {
		return nil, err
	}
	// Rewrite, then check again: what is left is reported.
	if err := m.check(); err != nil {
		return nil, err
	}
	m.rewriteCalls()
	if err := m.check(); err != nil {
		return nil, err
	}
	rep.Left = m.left()
	for _, items := range [][]Item{rep.Rewritten, rep.Left} {
		for i := range items {
			if rel, err := filepath.Rel(opts.Dir, items[i].Pos.Filename); err == nil {
				items[i].Pos.Filename = rel
			}
		}
	}
	if opts.DryRun {
		return rep, nil
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(tmp, name))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		if err == nil {
			if err := os.WriteFile(filepath.Join(opts.Dir, name), data, 0o644); err != nil {
				return nil, err
			}
		}
	}
	for _, file := range m.files {
		if !bytes.Equal(m.src[file], m.orig[file]) {
			// gofmt sorts imports; a file that was gofmt-clean stays so.
			if formatted, err := format.Source(m.orig[file]); err == nil && bytes.Equal(formatted, m.orig[file]) {
				if out, err := format.Source(m.src[file]); err == nil {
					m.src[file] = out
				}
			}
			if err := os.WriteFile(file, m.src[file], 0o644); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}

type listed struct {
	ImportPath   string
	Name         string
	Dir          string
	Export       string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
	ForTest      string
	Module       *struct{ Main bool }
}

// unit is a set of files type-checked together: a package with its
// in-package tests, or its external tests.
type unit struct {
	path  string
	files []string
	ast   []*ast.File
	pkg   *types.Package
	info  *types.Info
	errs  []types.Error
}

type migration struct {
	opts    Options
	rep     *Report
	fset    *token.FileSet
	files   []string // every file of the module's packages
	orig    map[string][]byte
	src     map[string][]byte
	units   []*unit
	exports map[string]string
	imp     types.Importer
	tmp     string // go.mod and go.sum as edited, the overlay
}

// goCmd runs the go command on the module, with go.mod as edited: a copy,
// written over the module's at the end.
func (m *migration) goCmd(args ...string) *exec.Cmd {
	return m.goCmdWith(filepath.Join(m.tmp, "go.mod"), args...)
}

func (m *migration) goCmdWith(modFile string, args ...string) *exec.Cmd {
	if len(args) > 1 && args[0] != "mod" {
		args = append([]string{args[0], "-modfile=" + modFile}, args[1:]...)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = m.opts.Dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), m.opts.Env...)
	return cmd
}

// goMod moves go.mod's requirements of upstream's modules to this library's.
func (m *migration) goMod() error {
	modFile := filepath.Join(m.tmp, "go.mod")
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(m.opts.Dir, name))
		if err != nil && (name == "go.mod" || !os.IsNotExist(err)) {
			return err
		}
		if err == nil {
			if err := os.WriteFile(filepath.Join(m.tmp, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	out, err := m.goCmd("mod", "edit", "-json", modFile).Output()
	if err != nil {
		return fmt.Errorf("go mod edit -json: %w", errText(err))
	}
	var mod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return fmt.Errorf("go mod edit -json: %w", err)
	}
	var edits []string
	want := map[string]bool{}
	for _, r := range mod.Require {
		sub, ok := strings.CutPrefix(r.Path, UpstreamModule)
		if !ok || (sub != "" && !strings.HasPrefix(sub, "/")) {
			continue
		}
		edits = append(edits, "-droprequire="+r.Path)
		m.rep.GoMod = append(m.rep.GoMod, "dropped "+r.Path+" "+r.Version)
		target := ""
		for _, s := range append([]string{""}, separateModules...) {
			if sub == s {
				target = LibraryModule + s
			}
		}
		if target == "" { // a module upstream whose packages are in the root module here
			target = LibraryModule
		}
		want[target] = true
	}
	// A replace of upstream's module stays: a dependency built on upstream
	// still needs it, pointing at the compatibility module (docs/migration.md).
	var targets []string
	for t := range want {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	for _, t := range targets {
		edits = append(edits, "-require="+t+"@"+m.opts.Version)
		m.rep.GoMod = append(m.rep.GoMod, "required "+t+" "+m.opts.Version)
		if m.opts.Replace != "" {
			dir, err := filepath.Abs(filepath.Join(m.opts.Replace, strings.TrimPrefix(t, LibraryModule)))
			if err != nil {
				return err
			}
			edits = append(edits, "-replace="+t+"="+dir)
			m.rep.GoMod = append(m.rep.GoMod, "replaced "+t+" with "+dir)
		}
	}
	if len(edits) == 0 {
		return nil
	}
	if out, err := m.goCmd(append(append([]string{"mod", "edit"}, edits...), modFile)...).CombinedOutput(); err != nil {
		return fmt.Errorf("go mod edit: %w: %s", err, out)
	}
	return nil
}

func errText(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return err
}

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
	pkgs, err := m.list(append([]string{"list", "-e", "-mod=mod", "-overlay=" + overlayFile, "-export", "-deps", "-test", "-json=ImportPath,Export,ForTest,Module"}, m.opts.Patterns...)...)
	if err != nil {
		return err
	}
	m.exports = map[string]string{}
	order := map[string]int{}
	for i, p := range pkgs {
		if p.ForTest != "" || strings.HasSuffix(p.ImportPath, ".test") {
			continue
		}
		if p.Module != nil && p.Module.Main {
			order[p.ImportPath] = i
			continue
		}
		m.exports[p.ImportPath] = p.Export
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

// rewriteImports rewrites every import of upstream's module.
func (m *migration) rewriteImports() error {
	for _, file := range m.files {
		f, err := parser.ParseFile(token.NewFileSet(), file, m.src[file], parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		var edits []edit
		for _, spec := range f.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			if rest, ok := strings.CutPrefix(path, UpstreamModule); ok && (rest == "" || strings.HasPrefix(rest, "/")) {
				edits = append(edits, edit{int(spec.Path.Pos()) - 1, int(spec.Path.End()) - 1, strconv.Quote(LibraryModule + rest)})
			}
		}
		m.rep.Imports += len(edits)
		m.src[file] = apply(m.src[file], edits)
	}
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

// left returns the errors the compiler still reports, each with the page's
// line for it.
func (m *migration) left() []Item {
	seen := map[string]bool{}
	var items []Item
	for _, u := range m.units {
		for _, e := range u.errs {
			pos := m.fset.Position(e.Pos)
			key := pos.String() + e.Msg
			if seen[key] {
				continue
			}
			seen[key] = true
			it := Item{Pos: pos, What: e.Msg}
			it.PageRef, it.Page = pageLineFor(namesAt(u, e.Pos))
			items = append(items, it)
		}
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i].Pos, items[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Offset < b.Offset
	})
	return items
}

// edit replaces src[from:to].
type edit struct {
	from, to int
	text     string
}

// apply applies non-overlapping edits.
func apply(src []byte, edits []edit) []byte {
	if len(edits) == 0 {
		return src
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].from < edits[j].from })
	var b bytes.Buffer
	last := 0
	for _, e := range edits {
		if e.from < last {
			continue // overlapping an edit already made: the next run takes it
		}
		b.Write(src[last:e.from])
		b.WriteString(e.text)
		last = e.to
	}
	b.Write(src[last:])
	return b.Bytes()
}
