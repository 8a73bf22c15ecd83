package main

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"
)

// clusterNamePkg declares ClusterName.
const clusterNamePkg = LibraryModule + "/pkg/multicluster"

// isClusterName reports whether t is multicluster.ClusterName: an alias of
// string, which go/types keeps as an alias.
func isClusterName(t types.Type) bool {
	for {
		a, ok := t.(*types.Alias)
		if !ok {
			return false
		}
		if obj := a.Obj(); obj.Name() == "ClusterName" && obj.Pkg() != nil && obj.Pkg().Path() == clusterNamePkg {
			return true
		}
		t = a.Rhs()
	}
}

// isString reports whether t is a string, typed or not.
func isString(t types.Type) bool {
	if t == nil {
		return false
	}
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

// fromLibrary reports whether obj is declared by this library.
func fromLibrary(obj types.Object) bool {
	return obj != nil && obj.Pkg() != nil && (obj.Pkg().Path() == LibraryModule || strings.HasPrefix(obj.Pkg().Path(), LibraryModule+"/"))
}

// rewriteCalls makes the mechanical rewrites of the calls the compiler
// refuses, from the last check's types and errors, and returns how many it
// made. A rewrite inside another one waits for the next round, as does one
// that only the rewritten source shows (ForCluster(h, name.String()): the
// arguments are swapped once the String() is gone).
func (m *migration) rewriteCalls() (made int) {
	for _, u := range m.units {
		for _, f := range u.ast {
			file := m.fset.File(f.Pos())
			name := file.Name()
			src := m.src[name]
			off := func(p token.Pos) int { return file.Offset(p) }
			text := func(n ast.Node) string { return string(src[off(n.Pos()):off(n.End())]) }
			hasError := func(n ast.Node) bool {
				for _, e := range u.errs {
					if e.Pos >= n.Pos() && e.Pos < n.End() {
						return true
					}
				}
				return false
			}
			var edits []edit
			// add records a rewrite unless it overlaps one made in this round
			// (an outer one: the tree is walked from the top); the next round
			// makes it on the rewritten source.
			add := func(n ast.Node, what, page string, es ...edit) {
				for _, e := range es {
					for _, had := range edits {
						if e.from < had.to && had.from < e.to || e.from == had.from {
							return
						}
					}
				}
				edits = append(edits, es...)
				made++
				it := Item{Pos: m.fset.Position(n.Pos()), What: what}
				it.PageRef, it.Page = pageLineFor([]string{page})
				m.rep.Rewritten = append(m.rep.Rewritten, it)
			}
			record := func(n ast.Node, from, to ast.Node, replacement, page string) {
				add(n, text(from)+" -> "+replacement, page, edit{off(from.Pos()), off(to.End()), replacement})
			}
			var stack []ast.Node
			ast.Inspect(f, func(n ast.Node) bool {
				if n == nil {
					stack = stack[:len(stack)-1]
					return true
				}
				var parent ast.Node
				if len(stack) > 0 {
					parent = stack[len(stack)-1]
				}
				stack = append(stack, n)
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && len(call.Args) == 0 && u.info.Selections[sel] == nil &&
					isClusterName(u.info.Types[sel.X].Type) {
					x := text(sel.X)
					switch sel.Sel.Name {
					case "String":
						record(call, call, call, x, "ClusterName.String()")
						return false
					case "Empty":
						if un, ok := parent.(*ast.UnaryExpr); ok && un.Op == token.NOT {
							record(call, un, un, x+` != ""`, "ClusterName.Empty()")
							return false
						}
						repl := x + ` == ""`
						if needsParens(parent) {
							repl = "(" + repl + ")"
						}
						record(call, call, call, repl, "ClusterName.Empty()")
						return false
					}
				}
				if hasError(call) {
					if e, what, ok := contextArgument(u, call, off); ok {
						add(call, what+" in "+text(call.Fun)+"(...)", calleeName(call), e)
						return true
					}
				}
				if len(call.Args) == 2 && hasError(call) {
					if i, j, ok := swapped(u.info, call); ok {
						a, b := call.Args[i], call.Args[j]
						add(call, "the arguments of "+text(call.Fun)+" swapped to its parameters' order", calleeName(call),
							edit{off(a.Pos()), off(a.End()), text(b)}, edit{off(b.Pos()), off(b.End()), text(a)})
					}
				}
				return true
			})
			m.src[name] = apply(src, edits)
		}
	}
	return made
}

// needsParens reports whether x == "" needs parentheses where the call was.
func needsParens(parent ast.Node) bool {
	switch p := parent.(type) {
	case *ast.BinaryExpr:
		return p.Op != token.LAND && p.Op != token.LOR
	case *ast.UnaryExpr, *ast.SelectorExpr, *ast.IndexExpr, *ast.StarExpr, *ast.TypeAssertExpr:
		return true
	}
	return false
}

// callee returns the function a call calls, if it is a declared one.
func callee(info *types.Info, call *ast.CallExpr) *types.Func {
	fun := ast.Unparen(call.Fun)
	switch f := fun.(type) {
	case *ast.IndexExpr:
		fun = f.X
	case *ast.IndexListExpr:
		fun = f.X
	}
	var id *ast.Ident
	switch f := fun.(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
	}
	if id == nil {
		return nil
	}
	fn, _ := info.Uses[id].(*types.Func)
	return fn
}

func calleeName(call *ast.CallExpr) string {
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		return f.Sel.Name
	case *ast.Ident:
		return f.Name
	}
	return ""
}

// swapped reports whether a call of this library's passes a cluster name and
// another argument the other way round from the parameters: exactly one
// parameter is a string and exactly one argument is, at the other place.
func swapped(info *types.Info, call *ast.CallExpr) (int, int, bool) {
	fn := callee(info, call)
	if fn == nil || !fromLibrary(fn) {
		return 0, 0, false
	}
	sig := fn.Type().(*types.Signature)
	if sig.Params().Len() != 2 || sig.Variadic() {
		return 0, 0, false
	}
	param := -1
	for i := range 2 {
		if isString(sig.Params().At(i).Type()) {
			param = i
		}
	}
	arg, args := -1, 0
	for i, a := range call.Args {
		if isString(info.Types[a].Type) {
			arg = i
			args++
		}
	}
	if param < 0 || isString(sig.Params().At(1-param).Type()) || args != 1 || arg == param {
		return 0, 0, false
	}
	return 0, 1, true
}

// namesAt returns the names the error at pos is about, innermost first:
// what to look the page up by.
func namesAt(u *unit, pos token.Pos) []string {
	var names []string
	for _, f := range u.ast {
		if pos < f.Pos() || pos >= f.End() {
			continue
		}
		var path []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil || pos < n.Pos() || pos >= n.End() {
				return false
			}
			path = append(path, n)
			return true
		})
		for i := len(path) - 1; i >= 0; i-- {
			switch n := path[i].(type) {
			case *ast.SelectorExpr:
				if isClusterName(u.info.Types[n.X].Type) {
					names = append(names, "ClusterName."+n.Sel.Name+"()")
				}
				if obj := u.info.Uses[n.Sel]; obj == nil || fromLibrary(obj) {
					names = append(names, n.Sel.Name)
				}
			case *ast.CallExpr:
				if fn := callee(u.info, n); fn != nil && fromLibrary(fn) {
					names = append(names, fn.Name())
				}
			case ast.Expr:
				if isClusterName(u.info.Types[n].Type) {
					names = append(names, "ClusterName")
				}
			}
		}
	}
	return names
}

// isContext reports whether t is context.Context.
func isContext(t types.Type) bool {
	if t == nil {
		return false
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "context" && n.Obj().Name() == "Context"
}

// contextArgument returns the edit for a call of this library's that
// differs from its parameters by a leading context only: one that lacks it
// gets the ctx in scope (none in scope: no edit), one that passes a context
// the function does not take loses it.
func contextArgument(u *unit, call *ast.CallExpr, off func(token.Pos) int) (edit, string, bool) {
	fn := callee(u.info, call)
	if fn == nil || !fromLibrary(fn) || call.Ellipsis.IsValid() {
		return edit{}, "", false
	}
	sig := fn.Type().(*types.Signature)
	np, na := sig.Params().Len(), len(call.Args)
	if sig.Variadic() {
		return edit{}, "", false
	}
	argIsContext := na > 0 && isContext(u.info.Types[call.Args[0]].Type)
	switch {
	case na == np-1 && isContext(sig.Params().At(0).Type()) && !argIsContext:
		ctx := contextInScope(u, call.Lparen)
		if ctx == "" {
			return edit{}, "", false
		}
		text := ctx
		if na > 0 {
			text += ", "
		}
		at := off(call.Lparen) + 1
		return edit{at, at, text}, "passed " + ctx + " first", true
	case na == np+1 && argIsContext && (np == 0 || !isContext(sig.Params().At(0).Type())):
		end := off(call.Rparen)
		if na > 1 {
			end = off(call.Args[1].Pos())
		}
		return edit{off(call.Args[0].Pos()), end, ""}, "dropped the context argument", true
	}
	return edit{}, "", false
}

// contextInScope returns "ctx" if a context.Context of that name is in
// scope at pos.
func contextInScope(u *unit, pos token.Pos) string {
	if u.pkg == nil {
		return ""
	}
	scope := u.pkg.Scope().Innermost(pos)
	if scope == nil {
		return ""
	}
	if _, obj := scope.LookupParent("ctx", pos); obj != nil {
		if v, ok := obj.(*types.Var); ok && isContext(v.Type()) {
			return "ctx"
		}
	}
	return ""
}
