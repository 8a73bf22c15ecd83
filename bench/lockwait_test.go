package bench

import (
	"bufio"
	"bytes"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"
)

// recordLockWaits records every contended lock in the mutex profile, for
// lockWaits, until the returned function is called.
func recordLockWaits() func() {
	prev := runtime.SetMutexProfileFraction(1)
	return func() { runtime.SetMutexProfileFraction(prev) }
}

// lockTotals is the time goroutines waited, so far, for locks released in
// the fleet engine and in the fair queue.
type lockTotals struct{ engine, queue time.Duration }

// lockWaits reads the process's mutex profile. The profile charges a wait to
// the stack that released the lock: a record whose first frame outside sync
// and runtime is a method of the engine (or of the queue) is a wait for that
// lock. Waits of several goroutines add up: the total can exceed wall time.
func lockWaits(b *testing.B) lockTotals {
	var buf bytes.Buffer
	if err := pprof.Lookup("mutex").WriteTo(&buf, 1); err != nil {
		b.Fatal(err)
	}
	var t lockTotals
	cyclesPerSecond := 1.0
	var cycles float64
	var engine, queue, holder bool
	flush := func() {
		d := time.Duration(cycles / cyclesPerSecond * float64(time.Second))
		if engine {
			t.engine += d
		}
		if queue {
			t.queue += d
		}
		cycles, engine, queue = 0, false, false
	}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "cycles/second="):
			if v, err := strconv.ParseFloat(strings.TrimPrefix(line, "cycles/second="), 64); err == nil && v > 0 {
				cyclesPerSecond = v
			}
		case strings.HasPrefix(line, "#"):
			// The first frame outside sync and runtime released the lock.
			f := strings.Fields(line)
			if holder || len(f) < 3 || strings.HasPrefix(f[2], "sync.") || strings.HasPrefix(f[2], "runtime.") {
				continue
			}
			holder = true
			engine = strings.Contains(f[2], "fleet.(*Engine)")
			queue = strings.Contains(f[2], "fairqueue.(*Queue")
		case strings.Contains(line, " @ "):
			flush()
			holder = false
			if f := strings.Fields(line); len(f) > 0 {
				cycles, _ = strconv.ParseFloat(f[0], 64)
			}
		}
	}
	flush()
	return t
}
