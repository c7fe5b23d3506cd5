// Package browser gives a model a real browser: a headless Chromium,
// driven through the DevTools protocol (github.com/chromedp/chromedp), and
// the tools to use it, with the names and arguments of Playwright MCP so
// that prompts and recordings carry over.
//
//	b := browser.New(&browser.Options{StartURL: "https://example.com"})
//	defer b.Close()
//	agent := loop.NewAgent(model, b.Tools(), nil)
//
// The model reads the page as an accessibility snapshot, text in which
// every element it can act on has a ref ([ref=e5]), and acts on refs:
// browser_navigate, browser_navigate_back, browser_snapshot,
// browser_click, browser_type, browser_press_key, browser_select_option,
// browser_hover, browser_scroll, browser_wait_for, browser_tabs,
// browser_file_upload (files of Options.Files for a file chooser); it
// sees the screen with browser_take_screenshot (an image part). Each
// action
// answers with the page's URL and title, a fresh snapshot (or the word
// that it is unchanged) and what the page did meanwhile: dialogs, new
// tabs, requests refused.
//
// # The browser
//
// Chromium is the distribution's package, found on PATH (or
// [Options.ExecPath]); nothing is downloaded. It starts on the first tool
// call, with its own profile (a temporary directory, or
// [Options.ProfileDir]), downloads refused, dialogs answered (alerts
// accepted, confirm and prompt dismissed, and the model told), at most
// [Options.MaxTabs] tabs, every action bounded by [Options.ActionTimeout],
// snapshots by [Options.MaxSnapshotNodes] and [Options.MaxSnapshotBytes],
// screenshots by [Options.MaxScreenshotBytes]. [Browser.Close] kills the
// process and its helpers and removes a temporary profile. A kept profile
// also holds the cookies (session cookies included) and the open tabs,
// restored when a browser starts again on it.
//
// # The address policy
//
// Pages reach only the public internet, by the policy of web_fetch
// (internal/netpolicy): every request a tab makes is paused by the
// DevTools Fetch domain and judged on the addresses its host resolves to,
// and every connection the browser opens goes through a proxy of this
// package that judges the address it dials, so that DNS rebinding and
// requests the Fetch domain does not see are refused too.
// [Options.AllowPrivate] and [Options.Allow] open it. See docs/browser.md.
//
// Everything from the page (names, values, dialog messages, URLs) is
// untrusted: it is quoted in JSON string syntax and cut before the model
// sees it.
package browser
