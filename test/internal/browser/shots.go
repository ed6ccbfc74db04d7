package browser

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// ShotsDirEnv names a directory where Shots keeps the screenshots a test takes, for a person to
// look at; unset, they go to a temporary directory removed with the test.
const ShotsDirEnv = "OPEMU_DASHBOARD_SHOTS"

// Shots is a numbered sequence of screenshots of one test's page.
type Shots struct {
	dir string
	n   int
}

// NewShots starts a sequence for t, in $OPEMU_DASHBOARD_SHOTS/<test name> or a temporary
// directory.
func NewShots(t *testing.T) *Shots {
	t.Helper()
	dir := t.TempDir()
	if root := os.Getenv(ShotsDirEnv); root != "" {
		dir = filepath.Join(root, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_"))
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	return &Shots{dir: dir}
}

// Take screenshots the whole page as "NN-label.png" and returns the PNG.
func (s *Shots) Take(t *testing.T, ctx context.Context, label string) []byte {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	return s.save(t, label, png)
}

// TakeTop screenshots the page from its top down to the bottom of the element sel (and the
// page's margin below it) as "NN-label.png", and returns the PNG.
func (s *Shots) TakeTop(t *testing.T, ctx context.Context, label, sel string) []byte {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.Action[[]byte](func(ctx context.Context, tg *chromedp.Target) ([]byte, error) {
		bottom, err := chromedp.Run(ctx, chromedp.Evaluate[float64](fmt.Sprintf(
			`document.querySelector(%q).getBoundingClientRect().bottom + window.scrollY + 14`, sel)))
		if err != nil {
			return nil, err
		}
		width, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.clientWidth`))
		if err != nil {
			return nil, err
		}
		r, err := cdp.Call(ctx, tg, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format:                page.CaptureScreenshotFormatPng,
			CaptureBeyondViewport: &yes,
			FromSurface:           &yes,
			Clip:                  &page.Viewport{Width: width, Height: math.Round(bottom), Scale: 1},
		})
		if err != nil {
			return nil, err
		}
		return r.Data, nil
	}))
	require.NoError(t, err)
	return s.save(t, label, png)
}

var yes = true

func (s *Shots) save(t *testing.T, label string, png []byte) []byte {
	t.Helper()
	s.n++
	path := filepath.Join(s.dir, fmt.Sprintf("%02d-%s.png", s.n, label))
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot %s", path)
	return png
}

// PNGText returns png with a tEXt chunk key=value after its header, so a picture can say what
// it was made from.
func PNGText(png []byte, key, value string) []byte {
	const header = 8 + 4 + 4 + 13 + 4 // signature, then IHDR: length, type, data, CRC
	data := append(append([]byte(key), 0), value...)
	chunk := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	chunk = append(chunk, "tEXt"...)
	chunk = append(chunk, data...)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
	out := append([]byte(nil), png[:header]...)
	out = append(out, chunk...)
	return append(out, png[header:]...)
}

// ReadPNGText returns the value of png's tEXt chunk key, if it has one.
func ReadPNGText(png []byte, key string) (string, bool) {
	if len(png) < 8 {
		return "", false
	}
	for b := png[8:]; len(b) >= 12; {
		n := int(binary.BigEndian.Uint32(b))
		if n < 0 || len(b) < 12+n {
			return "", false
		}
		if string(b[4:8]) == "tEXt" {
			if k, v, ok := bytes.Cut(b[8:8+n], []byte{0}); ok && string(k) == key {
				return string(v), true
			}
		}
		b = b[12+n:]
	}
	return "", false
}
