package apply

// GroupStats exposes to the tests how many groups committed and how many payments they applied.
func (a *Applier) GroupStats() (groups, applied int64) {
	return a.group.groups.Load(), a.group.applied.Load()
}
