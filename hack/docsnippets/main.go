// Command docsnippets keeps the Go snippets of the book (docs/) identical to
// regions of the compiled programs under examples/, so that every snippet a
// reader copies builds.
//
// A region of a Go file under examples/ is marked with
//
//	// snippet:NAME
//	...
//	// end-snippet
//
// and a Markdown file under docs/ includes it with
//
//	<!-- snippet:NAME -->
//	<!-- end-snippet -->
//
// Run from the repository root, it rewrites what lies between the Markdown
// markers (make docs). With -check it changes nothing and fails when a
// snippet differs from its source, when a Go code block of the book is not a
// snippet, when a snippet name is unknown, or when a relative link of the book
// points at a file that does not exist or at a heading (#fragment) that a
// Markdown file does not have (make lint).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

type region struct {
	file string // slash path relative to the repository root
	line int
	body string
}

func main() {
	check := flag.Bool("check", false, "report drift instead of rewriting the Markdown files")
	docs := flag.String("docs", "docs", "directory of the book")
	examples := flag.String("examples", "examples", "directory of the example programs")
	flag.Parse()
	if err := run(*docs, *examples, *check); err != nil {
		fmt.Fprintln(os.Stderr, "docsnippets:", err)
		os.Exit(1)
	}
}

func run(docsDir, examplesDir string, check bool) error {
	regions, err := readRegions(examplesDir)
	if err != nil {
		return err
	}
	var problems []string
	err = filepath.WalkDir(docsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".md" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out, errs := render(path, string(data), regions)
		problems = append(problems, errs...)
		problems = append(problems, checkLinks(path, string(data))...)
		if out == string(data) {
			return nil
		}
		if check {
			problems = append(problems, fmt.Sprintf("%s: snippets differ from their sources; run `make docs`", path))
			return nil
		}
		return os.WriteFile(path, []byte(out), 0o644)
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return errors.New("\n  " + strings.Join(problems, "\n  "))
	}
	return nil
}

var (
	goStart = regexp.MustCompile(`^\s*// snippet:([A-Za-z0-9_.-]+)\s*$`)
	goEnd   = regexp.MustCompile(`^\s*// end-snippet\s*$`)
	mdStart = regexp.MustCompile(`^<!-- snippet:([A-Za-z0-9_.-]+) -->$`)
	mdEnd   = regexp.MustCompile(`^<!-- end-snippet -->$`)
)

// readRegions collects every marked region of the Go files under dir.
func readRegions(dir string) (map[string]region, error) {
	regions := map[string]region{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".go" {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		var name string
		var start int
		var body []string
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case goStart.MatchString(line):
				if name != "" {
					return fmt.Errorf("%s:%d: snippet %q starts inside snippet %q", path, n, goStart.FindStringSubmatch(line)[1], name)
				}
				name, start, body = goStart.FindStringSubmatch(line)[1], n, nil
			case goEnd.MatchString(line):
				if name == "" {
					return fmt.Errorf("%s:%d: end-snippet without a start", path, n)
				}
				if prev, ok := regions[name]; ok {
					return fmt.Errorf("%s:%d: snippet %q is also defined in %s:%d", path, start, name, prev.file, prev.line)
				}
				regions[name] = region{file: filepath.ToSlash(path), line: start, body: dedent(body)}
				name = ""
			case name != "":
				body = append(body, line)
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
		if name != "" {
			return fmt.Errorf("%s:%d: snippet %q has no end-snippet", path, start, name)
		}
		return nil
	})
	return regions, err
}

// dedent removes the leading tabs common to every non-empty line and the
// blank lines at both ends.
func dedent(lines []string) string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if common < 0 || n < common {
			common = n
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) >= common && common > 0 {
			l = l[common:]
		}
		out[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(out, "\n") + "\n"
}

// render returns the Markdown file with every snippet block filled from its
// region, and the problems found.
func render(path, text string, regions map[string]region) (string, []string) {
	var out, problems []string
	lines := strings.Split(text, "\n")
	inFence := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := mdStart.FindStringSubmatch(line); m != nil && !inFence {
			end := i + 1
			for end < len(lines) && !mdEnd.MatchString(lines[end]) {
				end++
			}
			if end == len(lines) {
				problems = append(problems, fmt.Sprintf("%s:%d: snippet %q has no <!-- end-snippet -->", path, i+1, m[1]))
				out = append(out, lines[i:]...)
				break
			}
			r, ok := regions[m[1]]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s:%d: no region %q under examples/", path, i+1, m[1]))
				out = append(out, lines[i:end+1]...)
			} else {
				rel, err := filepath.Rel(filepath.Dir(path), filepath.FromSlash(r.file))
				if err != nil {
					rel = r.file
				}
				out = append(out, line, "```go")
				out = append(out, strings.Split(strings.TrimSuffix(r.body, "\n"), "\n")...)
				out = append(out, "```", fmt.Sprintf("<sub>From [%s](%s)</sub>", r.file, filepath.ToSlash(rel)), lines[end])
			}
			i = end
			continue
		}
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if !inFence && strings.TrimPrefix(trimmed, "```") == "go" {
				problems = append(problems, fmt.Sprintf("%s:%d: a Go code block outside snippet markers (put the code in examples/ and include it)", path, i+1))
			}
			inFence = !inFence
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n"), problems
}

var (
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
)

// prose yields the lines of a Markdown text that are outside fenced code
// blocks, with their index (line number minus one). A fence's closing line is
// yielded: it holds no link or heading.
func prose(text string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		inFence := false
		for n, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if !inFence && !yield(n, line) {
				return
			}
		}
	}
}

// checkLinks reports relative links to files that do not exist, and links
// whose #fragment names no heading (or <a id>) of the Markdown file they
// point at.
func checkLinks(path, text string) []string {
	var problems []string
	for n, line := range prose(text) {
		// Code spans are not links: `TypedControllerManagedBy[MyReq](mgr)`.
		for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			resolved := path
			if file != "" {
				resolved = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
				if _, err := os.Stat(resolved); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: broken link %q", path, n+1, m[1]))
					continue
				}
			}
			if fragment == "" || filepath.Ext(resolved) != ".md" {
				continue
			}
			targetText := text
			if resolved != path {
				data, err := os.ReadFile(resolved)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: link %q: %v", path, n+1, m[1], err))
					continue
				}
				targetText = string(data)
			}
			if !anchors(targetText)[fragment] {
				problems = append(problems, fmt.Sprintf("%s:%d: broken link %q: no such heading", path, n+1, m[1]))
			}
		}
	}
	return slices.Compact(problems)
}

var (
	heading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlID   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	nonSlug  = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
	markdown = strings.NewReplacer("`", "", "*", "")
)

// anchors returns the fragments a Markdown renderer gives the headings of a
// page, as GitHub does: lower case, punctuation removed, spaces turned into
// hyphens, "-1", "-2", ... appended to repeats; and the ids of <a> tags.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(text) {
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		// Link text counts, not its target: [Fair queueing](x.md) is "fair-queueing".
		title := link.ReplaceAllString(markdown.Replace(m[1]), "")
		slug := strings.ReplaceAll(nonSlug.ReplaceAllString(strings.ToLower(title), ""), " ", "-")
		if k := seen[slug]; k > 0 {
			out[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}
