package main

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite pagelines.txt from docs/migration.md")

// TestPageLinesAreCurrent fails when the rows the command quotes differ
// from docs/migration.md's: go test ./cmd/mcmigrate -run TestPageLinesAreCurrent -update.
func TestPageLinesAreCurrent(t *testing.T) {
	page, err := os.ReadFile("../../docs/migration.md")
	if err != nil {
		t.Fatal(err)
	}
	want := extractPageLines(string(page))
	if *update {
		if err := os.WriteFile("pagelines.txt", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if pageLines != want {
		t.Error("pagelines.txt differs from docs/migration.md's table rows: go test ./cmd/mcmigrate -run TestPageLinesAreCurrent -update")
	}
	if n, row := pageLineFor([]string{"ClusterName.String()"}); n == 0 || !strings.Contains(row, "req.ClusterName.String()") {
		t.Errorf("no row for ClusterName.String(): %d %q", n, row)
	}
}

// TestMigrateAProgramOfTheUpstreamDesign migrates testdata/upstream, a
// program written against sigs.k8s.io/multicluster-runtime (String and
// Empty on ClusterName, ForCluster(handler, name), an in-package test), in
// a copy outside this repository's workspace, loaded once: every import and
// the go.mod requirement move, every refused call with a mechanical
// replacement is rewritten, and what is left (a ClusterName used as a
// fmt.Stringer) is reported with the page's row.
func TestMigrateAProgramOfTheUpstreamDesign(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"main.go", "main_test.go"} {
		copyFile(t, filepath.Join("testdata", "upstream", name), filepath.Join(dir, name))
	}
	mod, err := os.ReadFile("testdata/upstream/go.mod.in")
	if err != nil {
		t.Fatal(err)
	}
	// The versions of the library's own dependencies, which the module
	// cache has; and their checksums.
	libMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	requires := libMod[bytes.Index(libMod, []byte("\nrequire"))+1:]
	// A dependency built on upstream would need the compatibility module:
	// the replace stays.
	compatReplace := "replace " + UpstreamModule + " => " + filepath.Join(root, "compat") + "\n"
	writeFile(t, filepath.Join(dir, "go.mod"), string(mod)+string(requires)+"\n"+compatReplace)
	copyFile(t, filepath.Join(root, "go.sum"), filepath.Join(dir, "go.sum"))

	started := time.Now()
	rep, err := Migrate(Options{
		Dir:     dir,
		Replace: root,
		Env:     []string{"GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("migrated in %s", time.Since(started).Round(time.Millisecond))
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())

	gomod := readFile(t, filepath.Join(dir, "go.mod"))
	if strings.Contains(gomod, UpstreamModule+" v") || !strings.Contains(gomod, UpstreamModule+" => "+filepath.Join(root, "compat")) ||
		!strings.Contains(gomod, LibraryModule+" "+DefaultVersion) ||
		!strings.Contains(gomod, LibraryModule+" => "+root) {
		t.Errorf("go.mod not moved:\n%s", gomod)
	}
	if rep.Imports != 6 {
		t.Errorf("%d import paths rewritten, want 6", rep.Imports)
	}
	main := readFile(t, filepath.Join(dir, "main.go"))
	test := readFile(t, filepath.Join(dir, "main_test.go"))
	for _, src := range []string{main, test} {
		for _, gone := range []string{"sigs.k8s.io/multicluster-runtime", "ClusterName.String()", "name.String()", ".Empty()"} {
			if strings.Contains(src, gone) {
				t.Errorf("%q is left:\n%s", gone, src)
			}
		}
	}
	for _, want := range []string{
		`if req.ClusterName == "" {`,
		`if req.ClusterName != "" && req.Namespace == "" {`,
		`"cluster", req.ClusterName)`,
		`names := []string{req.ClusterName, "host"}`,
		`host := name == ""`,
		`fmt.Sprintf("%s (host: %v)", name, host)`,
		`"object", req.NamespacedName.String())`, // a String of another type stays
		`mcbuilder "` + LibraryModule + `/pkg/builder"`,
	} {
		if !strings.Contains(main, want) {
			t.Errorf("main.go lacks %q:\n%s", want, main)
		}
	}
	if !strings.Contains(test, `if multicluster.ClusterName("") != "" {`) {
		t.Errorf("main_test.go not rewritten:\n%s", test)
	}
	if len(rep.Rewritten) < 8 {
		t.Errorf("%d rewrites, want at least 8 (6 in main.go, 1 in main_test.go, and ForCluster's arguments where they differ)", len(rep.Rewritten))
	}
	for _, it := range rep.Rewritten {
		if it.Page == "" {
			t.Errorf("rewrite without the page's row: %+v", it)
		}
	}
	// What the compiler still refuses: the Stringer, with the page's row.
	if len(rep.Left) != 1 {
		t.Fatalf("left: %+v, want the fmt.Stringer line only", rep.Left)
	}
	left := rep.Left[0]
	if !strings.Contains(left.What, "fmt.Stringer") || left.Pos.Filename != "main.go" || left.Pos.Line != 42 || !strings.Contains(left.Page, "ClusterName") {
		t.Errorf("left: %+v", left)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	writeFile(t, to, readFile(t, from))
}

func readFile(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func writeFile(t *testing.T, file, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestADependencyOnUpstreamMovesToTheCompatibilityModule migrates
// testdata/withdep, a program whose provider module (upstreamdep) is built
// on upstream's module (a stand-in, replaced in go.mod: ClusterName a
// defined type, as upstream's): the replace moves to the compatibility
// module, and the program, passing the provider to this library's manager,
// then type-checks. Without it the provider is no multicluster.Provider of
// this library's.
func TestADependencyOnUpstreamMovesToTheCompatibilityModule(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	libMod := readFile(t, filepath.Join(root, "go.mod"))
	requires := libMod[strings.Index(libMod, "\nrequire")+1:]
	dir := t.TempDir()
	err = filepath.WalkDir("testdata/withdep", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("testdata/withdep", path)
		data := readFile(t, path)
		if d.Name() == "go.mod.in" {
			rel, data = filepath.Join(filepath.Dir(rel), "go.mod"), data+requires
			copyFile(t, filepath.Join(root, "go.sum"), filepath.Join(dir, filepath.Dir(rel), "go.sum"))
		}
		writeFile(t, filepath.Join(dir, rel), data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Migrate(Options{
		Dir:     dir,
		Replace: root,
		Env:     []string{"GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	if len(rep.Left) != 0 {
		t.Errorf("left: %+v, want none: the provider built on upstream is this library's through the compatibility module", rep.Left)
	}
	gomod := readFile(t, filepath.Join(dir, "go.mod"))
	if !strings.Contains(gomod, UpstreamModule+" => "+filepath.Join(root, "compat")) || strings.Contains(gomod, "./standin") {
		t.Errorf("go.mod does not replace upstream's module by the compatibility module:\n%s", gomod)
	}
	if !strings.Contains(out.String(), "a dependency builds on "+UpstreamModule) {
		t.Errorf("the report does not say why go.mod's replace moved:\n%s", out.String())
	}
}
