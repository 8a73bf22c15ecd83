package main

import (
	_ "embed"
	"regexp"
	"strconv"
	"strings"
)

// pageLines are the table rows of docs/migration.md, "<line>\t<row>" each,
// embedded so that the command says what to write without the repository
// (TestPageLinesAreCurrent keeps them in step with the page).
//
//go:embed pagelines.txt
var pageLines string

// extractPageLines returns what pagelines.txt holds for a migration page:
// its table rows that name code (a backtick), with their line numbers.
func extractPageLines(page string) string {
	var b strings.Builder
	for i, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, "|") || !strings.Contains(line, "`") || strings.HasPrefix(line, "|---") {
			continue
		}
		b.WriteString(strconv.Itoa(i+1) + "\t" + line + "\n")
	}
	return b.String()
}

// pageLineFor returns the page's row for the first of names it has: a row
// whose first column names it, else any row naming it.
func pageLineFor(names []string) (int, string) {
	type row struct {
		n           int
		text, first string
	}
	var rows []row
	for _, l := range strings.Split(pageLines, "\n") {
		num, text, ok := strings.Cut(l, "\t")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(num)
		cells := strings.Split(text, "|")
		first := ""
		if len(cells) > 1 {
			first = cells[1]
		}
		rows = append(rows, row{n, text, first})
	}
	for _, name := range names {
		if name == "" {
			continue
		}
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_])` + regexp.QuoteMeta(name) + `($|[^A-Za-z0-9_])`)
		for _, r := range rows {
			if re.MatchString(r.first) {
				return r.n, r.text
			}
		}
		for _, r := range rows {
			if re.MatchString(r.text) {
				return r.n, r.text
			}
		}
	}
	return 0, ""
}
