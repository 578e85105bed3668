package delivery

// PacingEntries is how many pieces of pacing state the outbox holds, so a
// test can see idle state pruned.
func PacingEntries(o *Outbox) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.windows) + len(o.paused) + len(o.lastRun)
}
