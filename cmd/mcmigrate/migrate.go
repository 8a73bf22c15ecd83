package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
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

// maxRounds bounds the rounds of rewrites: each round rewrites what the
// last check shows; a rewrite inside another one, or one that only the
// rewritten source shows, is made in a round after.
const maxRounds = 4

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
	for round := 1; round <= maxRounds; round++ {
		made := m.rewriteCalls()
		if err := m.check(); err != nil {
			return nil, err
		}
		if made == 0 {
			break
		}
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
	Module       *struct {
		Path string
		Main bool
	}
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

	compatReplaced bool // upstream's modules replaced by the compatibility modules
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
			continue // overlapping one already made (rewriteCalls makes none)
		}
		b.Write(src[last:e.from])
		b.WriteString(e.text)
		last = e.to
	}
	b.Write(src[last:])
	return b.Bytes()
}
