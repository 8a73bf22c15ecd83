package build_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
)

func TestValidateClusterName(t *testing.T) {
	for _, ok := range []string{"eu-west-1", "/etc/kube/fleet.yaml+admin@prod", "team/a", "ünïcode", strings.Repeat("a", build.MaxClusterNameLength)} {
		if err := build.ValidateClusterName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"",
		strings.Repeat("a", build.MaxClusterNameLength+1),
		"prod\nINFO forged log line",
		"prod\x1b[2Jcleared",
		"tab\there",
		"nul\x00",
		"bidi\u202eeman",
		"zero\u200bwidth",
		"line\u2028separator",
		"paragraph\u2029separator",
		"bad-utf8\xff",
	} {
		err := build.ValidateClusterName(bad)
		if !errors.Is(err, build.ErrInvalidClusterName) {
			t.Errorf("%q accepted (err %v)", bad, err)
			continue
		}
		if strings.ContainsAny(err.Error(), "\n\x1b\x00\u202e") {
			t.Errorf("the error prints the raw name: %q", err.Error())
		}
	}
}
