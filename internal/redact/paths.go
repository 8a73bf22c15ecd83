package redact

import (
	"regexp"
	"strings"
)

// PathPlaceholder replaces a file path of the controller's machine.
const PathPlaceholder = "[path]"

// pathPattern finds absolute paths in free text: a slash at the start or
// after a space, quote, bracket, '=' or ',' (a URL's path follows its host,
// never one of those, so URLs keep theirs), up to the next of them or a
// colon (Go quotes a path as "open PATH: ...").
var pathPattern = regexp.MustCompile(`(^|[\s"'(\[=,])(/[^\s"'()\[\]<>,;:]*)`)

// apiPaths are the first segments of an API server's paths, which a probe's
// or request's error names ("/readyz: EOF"): they say nothing of the
// controller's machine and are kept.
var apiPaths = []string{"api", "apis", "readyz", "livez", "healthz", "version", "openapi", "metrics"}

// Paths replaces every absolute file path in s by PathPlaceholder: what a
// reader of the fleet's status may see must not tell where the controller
// keeps its kubeconfigs, tokens and certificates (an error that failed to
// read one names it). An API server's paths are kept. Logs keep the paths:
// their reader is the operator.
func Paths(s string) string {
	return pathPattern.ReplaceAllStringFunc(s, func(m string) string {
		i := strings.IndexByte(m, '/')
		if isAPIPath(m[i:]) {
			return m
		}
		return m[:i] + PathPlaceholder
	})
}

func isAPIPath(p string) bool {
	first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	first, _, _ = strings.Cut(first, "?")
	for _, a := range apiPaths {
		if first == a {
			return true
		}
	}
	return false
}
