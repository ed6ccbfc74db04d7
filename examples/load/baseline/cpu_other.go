//go:build !unix

package main

import "time"

// processCPU is not measured on this platform: it reports zero.
func processCPU() time.Duration { return 0 }
