package file

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// The paused extension is read as clientcmd loads it, in YAML or JSON, a
// string or a boolean; another value is an error quoting a bounded part of
// it; the context without it hashes as one that never had it.
func TestWithoutPause(t *testing.T) {
	for value, want := range map[string]any{
		`"true"`: true, `true`: true, `"false"`: false, `false`: false,
		`"yes"`: `is "yes": want`, `{a: 1}`: `is {"a":1}: want`, `"` + strings.Repeat("x", 100) + `"`: `is "` + strings.Repeat("x", 63) + `... (38 bytes more): want`,
	} {
		cfg, err := clientcmd.Load([]byte(`apiVersion: v1
kind: Config
contexts: [{name: x, context: {cluster: c, user: u, extensions: [{name: ` + PausedExtension + `, extension: ` + value + `}]}}]
`))
		if err != nil {
			t.Fatalf("%s: %v", value, err)
		}
		kctx, paused, err := withoutPause(cfg.Contexts["x"])
		switch want := want.(type) {
		case bool:
			if err != nil || paused != want || len(kctx.Extensions) != 0 || len(cfg.Contexts["x"].Extensions) != 1 {
				t.Errorf("%s: paused %v, extensions left %v, error %v; want paused %v, the extension gone from a copy", value, paused, kctx.Extensions, err, want)
			}
		case string:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %v, want one containing %q", value, err, want)
			}
		}
	}
}
