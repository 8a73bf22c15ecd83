package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestGeneratedFilesAreCurrent fails when the compatibility module's
// checked-in packages differ from what the generator writes for the
// library's API as it is: run `go generate ./...` in compat/.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	compatDir, err := findCompatDir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(compatDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		have, err := os.ReadFile(filepath.Join(compatDir, name))
		switch {
		case os.IsNotExist(err):
			t.Errorf("%s is missing: run go generate ./... in compat/", name)
		case err != nil:
			t.Error(err)
		case !bytes.Equal(have, files[name]):
			t.Errorf("%s differs from what the generator writes: run go generate ./... in compat/", name)
		}
	}
	for _, stale := range Stale(compatDir, files) {
		t.Errorf("%s is generated for a package the library no longer has: run go generate ./... in compat/", stale)
	}
	for _, pkg := range []string{"pkg/builder", "pkg/reconcile", "pkg/manager", "pkg/multicluster", "pkg/handler", "pkg/source", "pkg/controller", "pkg/clusters", "providers/multi", "providers/kind", "providers/cluster-api"} {
		if _, ok := files[filepath.Join(filepath.FromSlash(pkg), declFile)]; !ok {
			t.Errorf("no package generated at upstream's %s", pkg)
		}
	}
}

// TestWriteRemovesStaleFiles: a package the library dropped loses its
// generated files; files of its own are kept.
func TestWriteRemovesStaleFiles(t *testing.T) {
	dir := t.TempDir()
	gone := filepath.Join(dir, "pkg", "gone")
	if err := os.MkdirAll(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		declFile:               header + "\npackage gone\n",
		docFile:                header + "\npackage gone\n",
		"kept.go":              "package gone\n",
		"handmade/" + declFile: "package handmade\n",
	} {
		file := filepath.Join(gone, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string][]byte{filepath.Join("pkg", "kept", declFile): []byte(header + "\npackage kept\n")}
	if err := Write(dir, files); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{declFile, docFile} {
		if _, err := os.Stat(filepath.Join(gone, name)); !os.IsNotExist(err) {
			t.Errorf("stale %s was not removed (%v)", name, err)
		}
	}
	for _, name := range []string{"kept.go", filepath.Join("handmade", declFile), filepath.Join("..", "kept", declFile)} {
		if _, err := os.Stat(filepath.Join(gone, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
