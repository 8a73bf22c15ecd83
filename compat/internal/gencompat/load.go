package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// LibraryModule is the module whose API the compatibility module mirrors.
const LibraryModule = "github.com/mcruntime/multicluster-runtime"

// CompatModule is the compatibility module's path: upstream's.
const CompatModule = "sigs.k8s.io/multicluster-runtime"

// listed is what `go list -json` says of a package.
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	Export     string
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// library is the type-checked public API of the library.
type library struct {
	fset *token.FileSet
	pkgs []*libPackage
}

type libPackage struct {
	rel   string // path below the module: "" for the root package
	types *types.Package
	docs  map[string]string // doc comment of each exported top-level name
}

// findCompatDir returns the directory of the go.mod declaring CompatModule,
// searched from the working directory upwards.
func findCompatDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module "+CompatModule+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", CompatModule)
		}
		dir = parent
	}
}

// goList runs `go list` in dir and decodes its JSON stream.
func goList(dir string, args ...string) ([]listed, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("go list: decoding: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// SeparateModules are the library's providers with modules of their own;
// each has a compatibility module of its own at upstream's path, in the
// directory of the same name below compat/.
var SeparateModules = []string{"providers/kind", "providers/cluster-api"}

// libraryModule reports whether path is the library's root module or one of
// its separate modules.
func libraryModule(path string) bool {
	if path == LibraryModule {
		return true
	}
	for _, m := range SeparateModules {
		if path == LibraryModule+"/"+m {
			return true
		}
	}
	return false
}

// public reports whether a package of the library is part of its API: the
// root package and the packages under pkg/ and providers/ (the separate
// provider modules' included), except main packages and internal ones.
func public(p listed) bool {
	if p.Module == nil || !libraryModule(p.Module.Path) || p.Name == "main" {
		return false
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, LibraryModule), "/")
	if rel != "" && !strings.HasPrefix(rel, "pkg/") && !strings.HasPrefix(rel, "providers/") {
		return false
	}
	for _, elem := range strings.Split(rel, "/") {
		if elem == "internal" || elem == "testdata" || elem == "examples" {
			return false
		}
	}
	return true
}

// loadLibrary type-checks the library's public packages from the export
// data `go list -export` leaves in the build cache; the library is found
// through the build of the compatibility module (the workspace, or its
// go.mod's requirement).
func loadLibrary(compatDir string) (*library, error) {
	all, err := goList(compatDir, "-e", "-json=ImportPath,Name,Module", LibraryModule+"/...")
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range all {
		if public(p) {
			paths = append(paths, p.ImportPath)
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no public package of %s found from %s", LibraryModule, compatDir)
	}
	deps, err := goList(compatDir, append([]string{"-export", "-deps", "-json=ImportPath,Name,Dir,GoFiles,Export,Module,Error"}, paths...)...)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	byPath := map[string]listed{}
	for _, p := range deps {
		if p.Error != nil {
			return nil, fmt.Errorf("package %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		byPath[p.ImportPath] = p
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	lib := &library{fset: fset}
	sort.Strings(paths)
	for _, path := range paths {
		tp, err := imp.Import(path)
		if err != nil {
			return nil, fmt.Errorf("importing %s: %w", path, err)
		}
		docs, err := readDocs(byPath[path])
		if err != nil {
			return nil, err
		}
		lib.pkgs = append(lib.pkgs, &libPackage{
			rel:   strings.TrimPrefix(strings.TrimPrefix(path, LibraryModule), "/"),
			types: tp,
			docs:  docs,
		})
	}
	return lib, nil
}

// readDocs returns the doc comments of a package's exported top-level
// names, read from its source files (export data keeps no comments).
func readDocs(p listed) (map[string]string, error) {
	docs := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("package %s: %w", p.ImportPath, err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Doc != nil {
					docs[d.Name.Name] = d.Doc.Text()
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					doc := d.Doc
					var names []*ast.Ident
					switch s := spec.(type) {
					case *ast.TypeSpec:
						names = []*ast.Ident{s.Name}
						if s.Doc != nil {
							doc = s.Doc
						}
					case *ast.ValueSpec:
						names = s.Names
						if s.Doc != nil {
							doc = s.Doc
						}
					}
					if doc == nil {
						continue
					}
					for _, n := range names {
						docs[n.Name] = doc.Text()
					}
				}
			}
		}
	}
	return docs, nil
}
