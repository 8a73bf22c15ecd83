package build

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxClusterNameLength bounds cluster names, in bytes. Names appear in logs,
// Events, metric labels and request strings; a file path joined with a context
// name fits comfortably.
const MaxClusterNameLength = 512

// ErrInvalidClusterName is returned, wrapped, by ValidateClusterName.
var ErrInvalidClusterName = errors.New("invalid cluster name")

// ValidateClusterName checks a cluster name derived from input (a file path, a
// context, a Secret, an inventory object): not empty, at most
// MaxClusterNameLength bytes of valid UTF-8, without control or invisible
// formatting characters (newlines, line and paragraph separators, terminal
// escapes, bidirectional overrides) that would forge log lines or disguise one name as another.
// Errors quote the name with escapes, never raw.
func ValidateClusterName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidClusterName)
	case len(name) > MaxClusterNameLength:
		return fmt.Errorf("%w: %d bytes, more than %d, starting %.64q", ErrInvalidClusterName, len(name), MaxClusterNameLength, name)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidClusterName, name)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return fmt.Errorf("%w: %q contains the control or formatting character %U", ErrInvalidClusterName, name, r)
		}
	}
	return nil
}
