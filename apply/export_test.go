package apply

// GroupStats exposes to the tests how many groups committed and how many payments they applied.
func (a *Applier) GroupStats() (groups, applied int64) {
	return a.group.groups.Load(), a.group.applied.Load()
}

// SetAfterCommit makes Apply call f after its transaction committed and before it writes the
// done markers: the moment a slow replica is caught in spin's MARK_NS_AT_WRITE trail.
func (a *Applier) SetAfterCommit(f func()) { a.afterCommit = f }
