package manager

import (
	"sync"

	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
)

// fleetReaderOnce creates the manager's fleet reader on first use: a manager
// whose controllers never read the fleet as a whole carries no reader, and
// so nothing per cluster for it.
type fleetReaderOnce struct {
	once   sync.Once
	reader *fleetreader.Reader
	err    error
}

// GetFleetReader returns the manager's fleet reader, created and added to
// the manager on the first call (before or after Start).
func (m *mcManager) GetFleetReader() (*fleetreader.Reader, error) {
	m.fleetReader.once.Do(func() {
		m.fleetReader.reader, m.fleetReader.err = fleetreader.New(m)
	})
	return m.fleetReader.reader, m.fleetReader.err
}
