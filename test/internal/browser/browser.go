// Package browser starts headless Chromium (Debian's /usr/bin/chromium) for opemu's e2e and
// integration tests, driven through chromedp: the dashboard as a user meets it, and pages of
// other origins as an attacker would write them.
//
// Concurrency: each Start is its own browser with its own profile; parallel tests may each
// start one.
package browser

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/opemu/opemu/test/internal/tool"
)

// Path is where Chromium is.
const Path = "/usr/bin/chromium"

// Start starts headless Chromium with extra options and returns a chromedp context for it;
// the browser is stopped when t ends. Without Chromium the test fails in CI and is skipped
// elsewhere.
func Start(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	tool.At(t, Path, "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	opts = append(opts, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	return ctx
}
