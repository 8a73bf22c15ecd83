package systemmodel_test

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// The providers log through controller-runtime's logger; the engines'
	// logs, which a failing seed prints, go to the world's own.
	logf.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}
