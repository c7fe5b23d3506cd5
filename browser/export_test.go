package browser

// Profile returns the profile directory in use ("" before the browser
// starts), for tests.
func (b *Browser) Profile() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.profile
}

// ProxyServed returns how many requests the browser's address-policy proxy
// has served (0 when it does not run), for tests.
func (b *Browser) ProxyServed() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.px == nil {
		return 0
	}
	return b.px.served.Load()
}

// SafeFileName is safeFileName, for tests.
var SafeFileName = safeFileName
