package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

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
