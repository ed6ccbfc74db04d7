// Package app wires one opemu server from a Config: the store, the served kinds, admission, the
// write path, the event recorder, the built-in controller, leader election and the HTTP server.
// The opemu binary (internal/command) and tests start servers through it, so several servers can
// live in one process: nothing here, nor in the packages it wires, keeps process-wide state.
//
// Non-goals: reading flags or the environment (internal/command does), and any rule of the API
// (the packages below own those).
//
// Concurrency: Run blocks until the server has shut down and every goroutine it started has
// returned.
package app
