package browser

// Profile returns the profile directory in use ("" before the browser
// starts), for tests.
func (b *Browser) Profile() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.profile
}
