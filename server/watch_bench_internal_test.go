package server

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/registry"
)

// discard is a ResponseWriter that drops the body.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return io.Discard.Write(b) }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

// BenchmarkSSEEncode measures writing one watch event as an SSE frame.
func BenchmarkSSEEncode(b *testing.B) {
	s := cache.New(cache.Config{})
	defer s.Close()
	o, err := s.Create(context.Background(), cachetest.Key("default", "app"), cachetest.App("app", 3), cache.WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	w := &discard{h: http.Header{}}
	fw := newFrameWriter(w, time.Second)
	ev := registry.Event{Type: cache.Modified, Object: o, ResourceVersion: o.ResourceVersion()}
	b.ReportAllocs()
	b.SetBytes(int64(len(o.Raw())))
	for b.Loop() {
		if err := (sseFrames{}).event(fw, ev); err != nil {
			b.Fatal(err)
		}
	}
}
