package migration_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/printer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/mcruntime/multicluster-runtime"

// aliases are the names the migration page writes packages under, and the
// packages they stand for.
var aliases = map[string]string{
	"mcbuilder":           module + "/pkg/builder",
	"mccontroller":        module + "/pkg/controller",
	"mchandler":           module + "/pkg/handler",
	"mcmanager":           module + "/pkg/manager",
	"mcreconcile":         module + "/pkg/reconcile",
	"mcsource":            module + "/pkg/source",
	"multicluster":        module + "/pkg/multicluster",
	"clusters":            module + "/pkg/clusters",
	"sharded":             module + "/pkg/manager/coordinator/sharded",
	"multi":               module + "/providers/multi",
	"kubeconfig":          module + "/providers/kubeconfig",
	"file":                module + "/providers/file",
	"namespace":           module + "/providers/namespace",
	"nop":                 module + "/providers/nop",
	"clusterinventoryapi": module + "/providers/cluster-inventory-api",
	"kubeconfigstrategy":  module + "/providers/cluster-inventory-api/kubeconfigstrategy",
	"capi":                module + "/providers/cluster-api",
	"kind":                module + "/providers/kind",
}

var (
	loadOnce sync.Once
	loaded   map[string]*types.Package
	loadErr  error
)

// packages type-checks, from the export data the go command builds, every
// package the page names, with the providers of the other modules of
// go.work.
func packages(t *testing.T) map[string]*types.Package {
	t.Helper()
	loadOnce.Do(func() {
		var paths []string
		for _, p := range aliases {
			paths = append(paths, p)
		}
		cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, paths...)...)
		cmd.Dir = filepath.Join("..", "..")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			loadErr = &exec.ExitError{Stderr: stderr.Bytes()}
			return
		}
		exports := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			path, file, _ := strings.Cut(line, "\t")
			exports[path] = file
		}
		imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
			return os.Open(exports[path])
		})
		loaded = map[string]*types.Package{}
		for alias, path := range aliases {
			pkg, err := imp.Import(path)
			if err != nil {
				loadErr = err
				return
			}
			loaded[alias] = pkg
		}
	})
	if loadErr != nil {
		if ee, ok := loadErr.(*exec.ExitError); ok {
			t.Fatalf("go list -export: %s", ee.Stderr)
		}
		t.Fatal(loadErr)
	}
	return loaded
}

// lookup resolves a name as the page writes it: alias.Name, or
// alias.Type.Member (a method or a field).
func lookup(pkgs map[string]*types.Package, name string) types.Object {
	parts := strings.Split(name, ".")
	pkg := pkgs[parts[0]]
	if pkg == nil || len(parts) < 2 {
		return nil
	}
	obj := pkg.Scope().Lookup(parts[1])
	for _, member := range parts[2:] {
		if obj == nil {
			return nil
		}
		obj, _, _ = types.LookupFieldOrMethod(obj.Type(), true, pkg, member)
	}
	return obj
}

// qualifier writes packages under the page's aliases.
func qualifier(p *types.Package) string {
	for alias, path := range aliases {
		if p.Path() == path {
			return alias
		}
	}
	return p.Name()
}

// normalize prints a Go type expression without parameter names and type
// parameter lists, so that the page's upstream signature and the code's can
// be compared.
func normalize(t *testing.T, expr string) string {
	t.Helper()
	if strings.HasPrefix(expr, "func[") { // a generic function's type parameters
		depth := 0
		for i, r := range expr[len("func"):] {
			if r == '[' {
				depth++
			} else if r == ']' {
				if depth--; depth == 0 {
					expr = "func" + expr[len("func")+i+1:]
					break
				}
			}
		}
	}
	x, err := parser.ParseExpr(expr)
	if err != nil {
		t.Fatalf("signature %q: %v", expr, err)
	}
	unname := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		var fields []*ast.Field
		for _, f := range fl.List {
			for range max(1, len(f.Names)) {
				fields = append(fields, &ast.Field{Type: f.Type})
			}
		}
		fl.List = fields
	}
	ast.Inspect(x, func(n ast.Node) bool {
		if ft, ok := n.(*ast.FuncType); ok {
			unname(ft.Params)
			unname(ft.Results)
		}
		return true
	})
	var b bytes.Buffer
	if err := printer.Fprint(&b, token.NewFileSet(), x); err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// signature is the type of obj as the page writes it.
func signature(obj types.Object) string {
	return types.TypeString(obj.Type(), qualifier)
}

func page(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "migration.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// table returns the rows of the first table under heading, split into cells.
func table(t *testing.T, md, heading string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("the page has no heading %q", heading)
	}
	var rows [][]string
	sc := bufio.NewScanner(strings.NewReader(rest))
	started := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		if strings.HasPrefix(line, "|---") {
			continue
		}
		var cells []string
		for _, c := range splitRow(line) {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		t.Fatalf("no table under %q", heading)
	}
	return rows[1:] // without the header
}

// splitRow splits a Markdown table row on the pipes outside code spans.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	code := false
	for _, r := range line {
		switch {
		case r == '`':
			code = !code
		case r == '|' && !code:
			cells = append(cells, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(cells, cur.String())
}

var (
	codeSpan   = regexp.MustCompile("`([^`]+)`")
	identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*`)
)

// unquote returns the content of the code spans of a cell.
func unquote(cell string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// Every name of the page's signature table said to be "the same" has, here,
// the signature the page gives for upstream; a name that is not the same
// shows upstream's line and the line to write.
func TestMigrationPageSignatures(t *testing.T) {
	pkgs := packages(t)
	rows := table(t, page(t), "### Upstream's signatures")
	same := 0
	for _, row := range rows {
		if len(row) != 3 {
			t.Errorf("row %q: want 3 cells", row)
			continue
		}
		names, sigs := unquote(row[0]), unquote(row[1])
		if len(names) != 1 || len(sigs) != 1 {
			t.Errorf("row %q: want one name and one signature", row[0])
			continue
		}
		name, want := names[0], sigs[0]
		obj := lookup(pkgs, name)
		if !strings.HasPrefix(row[2], "the same") {
			if len(unquote(row[2])) == 0 {
				t.Errorf("%s: not the same, and the page gives no line to write", name)
			}
			continue
		}
		same++
		if obj == nil {
			t.Errorf("%s: the page says the same, and it is not declared", name)
			continue
		}
		if got, want := normalize(t, signature(obj)), normalize(t, want); got != want {
			t.Errorf("%s: the page says the same as upstream's %s, and it is %s", name, want, got)
		}
	}
	if same < 20 {
		t.Errorf("only %d names checked: the table was not found whole", same)
	}
}

// Every name the page's tables say is "the same" is declared here.
func TestNamesThePageCallsTheSameAreDeclared(t *testing.T) {
	pkgs := packages(t)
	md := page(t)
	for _, heading := range []string{"## Names", "### Names of the upstream design"} {
		for _, row := range table(t, md, heading) {
			if len(row) < 2 || !strings.HasPrefix(row[len(row)-1], "the same") && !strings.HasPrefix(row[1], "the same") {
				continue
			}
			for _, span := range unquote(row[0]) {
				name := identifier.FindString(span)
				if _, known := aliases[strings.Split(name, ".")[0]]; !known || !strings.Contains(name, ".") {
					continue
				}
				if lookup(pkgs, name) == nil {
					t.Errorf("%s: %q says the same, and it is not declared", heading, name)
				}
			}
		}
	}
}

// secondList is issue 41's list of names upstream has that this library
// lacked: each is declared here or on the page's list of names not here.
var secondList = []string{
	"namespace.NamespacedCluster.Name",
	"nop.Provider.Start",
	"sharded.Config",
	"sharded.Coordinator.AddAware",
	"sharded.Coordinator.Engage",
	"sharded.Coordinator.Runnable",
	"kubeconfigstrategy.New",
	"kubeconfigstrategy.Interface",
	"kubeconfigstrategy.CustomWatch",
	"kubeconfigstrategy.Option.Secret",
	"kubeconfigstrategy.Option.CredentialsProvider",
	"kubeconfigstrategy.SecretStrategyOption",
	"kubeconfigstrategy.CredentialsProviderOption",
	"coordinator/basic",
	"coordinator/sharded/peers",
	"coordinator/sharded/sharder",
	"util/sanitize",
}

func TestSecondListIsDeclaredOrOnThePage(t *testing.T) {
	pkgs := packages(t)
	notHere := map[string]string{}
	for _, row := range table(t, page(t), "### Upstream names not here") {
		for _, name := range unquote(row[0]) {
			notHere[name] = row[1]
		}
	}
	for _, name := range secondList {
		declared := lookup(pkgs, name) != nil
		replacement, listed := notHere[name]
		switch {
		case declared && listed:
			t.Errorf("%s is declared and also listed as not here", name)
		case !declared && !listed:
			t.Errorf("%s is neither declared nor listed on the page as not here", name)
		case listed && len(unquote(replacement)) == 0 && !strings.Contains(replacement, "refused"):
			t.Errorf("%s: the page lists it as not here without its replacement", name)
		}
	}
}

// The errors a program written for controller-runtime v0.24 (or older) meets
// first are on the page verbatim: the testdata programs are such programs,
// and the compiler's words for them must be found in the page's section.
func TestV024ErrorsAreOnThePage(t *testing.T) {
	md := page(t)
	_, section, ok := strings.Cut(md, "\n## From controller-runtime v0.24\n")
	if !ok {
		t.Fatal(`the page has no section "From controller-runtime v0.24"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, prog := range []string{"v024recorder", "v022recorder"} {
		cmd := exec.Command("go", "build", "-o", os.DevNull, "./"+filepath.ToSlash(filepath.Join("testdata", prog)))
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s builds: it should not against controller-runtime v0.25", prog)
			continue
		}
		var lines int
		for _, line := range strings.Split(string(out), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			// file:line:col: message — the message is what the page quotes.
			if i := strings.Index(line, ".go:"); i >= 0 {
				parts := strings.SplitN(line[i+len(".go:"):], ": ", 2)
				if len(parts) == 2 {
					line = parts[1]
				}
			}
			lines++
			if !strings.Contains(section, line) {
				t.Errorf("%s: the compiler says %q, which the v0.24 section does not quote", prog, line)
			}
		}
		if lines == 0 {
			t.Errorf("%s: no error lines in %q", prog, out)
		}
	}
}
