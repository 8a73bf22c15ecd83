package fleet

// ReadLocked runs f while the engine's lock is read-locked, as by a
// reconciler's Get.
func (e *Engine) ReadLocked(f func()) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	f()
}
