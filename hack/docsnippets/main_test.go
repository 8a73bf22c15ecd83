package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckLinks(t *testing.T) {
	dir := t.TempDir()
	there := "# There\n\n## Requests the library drops\n\n## Sharding: three replicas\n\n## Twice\n\n## Twice\n\n<a id=\"custom\"></a>\n"
	if err := os.WriteFile(filepath.Join(dir, "there.md"), []byte(there), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "page.md")
	text := strings.Join([]string{
		"# Page",
		"[ok](there.md) and [anchor](there.md#requests-the-library-drops) and [web](https://example.com)",
		"`mcbuilder.TypedControllerManagedBy[MyReq](mgr)` is code, not a link",
		"```text",
		"[in a fence](nowhere.md) [in a fence](there.md#nowhere)",
		"```",
		"[broken](missing.md)",
		"[bad anchor](there.md#no-such-heading)",
		"[punctuation](there.md#sharding-three-replicas) [second](there.md#twice-1) [html](there.md#custom)",
		"[same page](#page) [same page, bad](#nope) [not markdown](file.go#L10)",
	}, "\n")
	got := checkLinks(page, text)
	want := []string{
		page + `:7: broken link "missing.md"`,
		page + `:8: broken link "there.md#no-such-heading": no such heading`,
		page + `:10: broken link "#nope": no such heading`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("checkLinks =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestAnchors(t *testing.T) {
	got := anchors("# The `clusters` check\n## Fair queueing (v2)!\n```\n# not a heading\n```\n## Fair queueing (v2)!\n")
	for _, want := range []string{"the-clusters-check", "fair-queueing-v2", "fair-queueing-v2-1"} {
		if !got[want] {
			t.Errorf("anchors lack %q: %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a line in a code block became an anchor")
	}
}
