package browser

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// Page drives the page of a browser Start returned, failing its test on any error. Every call
// is bounded: Do by the timeout it is given, Text and Count by 5 s.
type Page struct {
	t   *testing.T
	ctx context.Context
}

// NewPage returns a Page for the browser of ctx (from Start), showing about:blank.
func NewPage(t *testing.T, ctx context.Context) *Page {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	return &Page{t: t, ctx: ctx}
}

// Ctx is the page's chromedp context.
func (p *Page) Ctx() context.Context { return p.ctx }

// Do runs actions in order; they must all be done within timeout.
func (p *Page) Do(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	c, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	require.NoError(p.t, chromedp.Do(c, actions...))
}

// Text returns the visible text (innerText) of the first element sel selects, trimmed, once
// there is one and it is shown. It finds the element and reads it in one evaluation: a page
// that re-renders (innerHTML) between a query and a read would otherwise detach the node
// found, whose text then reads as empty.
func (p *Page) Text(sel string) string {
	p.t.Helper()
	c, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(c, chromedp.Poll[[]string](fmt.Sprintf(`(() => {
		const e = document.querySelector(%q);
		return e && (e.offsetWidth || e.offsetHeight || e.getClientRects().length) ? [e.innerText] : null;
	})()`, sel)))
	require.NoError(p.t, err, "the text of %s", sel)
	require.Len(p.t, s, 1)
	return strings.TrimSpace(s[0])
}

// Count returns how many elements sel selects.
func (p *Page) Count(sel string) int {
	p.t.Helper()
	c, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	n, err := chromedp.Run(c, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	require.NoError(p.t, err)
	return n
}
