package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckLinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "there.md"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "page.md")
	text := strings.Join([]string{
		"[ok](there.md) and [anchor](there.md#x) and [web](https://example.com)",
		"`mcbuilder.TypedControllerManagedBy[MyReq](mgr)` is code, not a link",
		"```text",
		"[in a fence](nowhere.md)",
		"```",
		"[broken](missing.md)",
	}, "\n")
	got := checkLinks(page, text)
	if len(got) != 1 || !strings.Contains(got[0], `"missing.md"`) || !strings.Contains(got[0], ":6:") {
		t.Fatalf("checkLinks = %q, want only the broken link on line 6", got)
	}
}
