package registry

// SetRegistryBounds lowers the bounds of the registries for a test, until
// it ends: entries per key and kind, bytes added by a resolution. Tests
// that call it must not run in parallel with others that use registries.
func SetRegistryBounds(t interface{ Cleanup(func()) }, entries, resolvedBytes int) {
	e, b := maxEntries, maxResolvedBytes
	maxEntries, maxResolvedBytes = entries, resolvedBytes
	t.Cleanup(func() { maxEntries, maxResolvedBytes = e, b })
}
