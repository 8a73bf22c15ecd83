package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
)

// TestCallRewrites runs the call rewrites on a program using a small
// stand-in of the library (type-checked from source, with this library's
// import path), where each rule meets a call it must rewrite and one it must
// leave: arguments the other way round, a missing leading ctx with one in
// scope and without, an extra leading context.
func TestCallRewrites(t *testing.T) {
	fset := token.NewFileSet()
	std := importer.Default()
	libFile, err := parser.ParseFile(fset, "fake.go", `package fake

import "context"

type Handler interface{ Handle() }

type Registry struct{}

func (*Registry) Add(name string, v int) {}

func ForCluster(name string, h Handler) Handler { return h }

func Setup(ctx context.Context, mgr int) error { return nil }
`, 0)
	if err != nil {
		t.Fatal(err)
	}
	lib, err := (&types.Config{Importer: std}).Check(LibraryModule+"/pkg/fake", fset, []*ast.File{libFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mcFile, err := parser.ParseFile(fset, "multicluster.go", "package multicluster\n\ntype ClusterName = string\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := (&types.Config{}).Check(clusterNamePkg, fset, []*ast.File{mcFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const file = "/virtual/user.go"
	src := `package user

import (
	"context"

	"github.com/mcruntime/multicluster-runtime/pkg/fake"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

func f(ctx context.Context, h fake.Handler, r *fake.Registry) error {
	_ = fake.ForCluster(h, "east")
	_ = fake.ForCluster("west", h)
	r.Add(ctx, "x", 1)
	r.Add("y", 2)
	return fake.Setup(1)
}

func g() error {
	return fake.Setup(2)
}

func k(h fake.Handler, name multicluster.ClusterName) fake.Handler {
	return fake.ForCluster(h, name.String())
}
`
	m := &migration{
		rep:   &Report{},
		fset:  fset,
		src:   map[string][]byte{file: []byte(src)},
		files: []string{file},
		units: []*unit{{path: "example.com/user", files: []string{file}}},
		imp: importerFunc(func(path string) (*types.Package, error) {
			switch path {
			case lib.Path():
				return lib, nil
			case mc.Path():
				return mc, nil
			}
			return std.Import(path)
		}),
	}
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
	// The String() in ForCluster's argument first, then the arguments, in
	// the round after.
	rounds := 0
	for made := -1; made != 0; rounds++ {
		if rounds == maxRounds {
			t.Fatal("the rewrites do not end")
		}
		made = m.rewriteCalls()
		if err := m.check(); err != nil {
			t.Fatal(err)
		}
	}
	if rounds != 3 {
		t.Errorf("%d rounds, want 3 (the String(), then the arguments, then none)", rounds)
	}
	got := string(m.src[file])
	for _, want := range []string{
		`_ = fake.ForCluster("east", h)`,
		`_ = fake.ForCluster("west", h)`,
		`r.Add("x", 1)`,
		`r.Add("y", 2)`,
		`return fake.Setup(ctx, 1)`,
		`return fake.Setup(2)`, // no ctx in scope: left
		`return fake.ForCluster(name, h)`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the rewritten program lacks %q:\n%s", want, got)
		}
	}
	if len(m.rep.Rewritten) != 5 {
		t.Errorf("rewrites: %+v, want 5", m.rep.Rewritten)
	}
	left := m.left()
	if len(left) != 1 || left[0].Pos.Line != 19 || !strings.Contains(left[0].What, "not enough arguments") {
		t.Errorf("left: %+v, want the Setup without a ctx in scope", left)
	}
}
