// Package command is the opemu command: every setting of SPEC §1 read from flags and the
// environment (the flag wins) with the binary's defaults, the tokens and certificates they name
// (SPEC §13) and the snapshot LOAD names (SPEC §23), and the subcommands `opemu kubeconfig`,
// `opemu snapshot save|restore` (over a running server's API) and `opemu etcd`. Run is what main calls; it hands the server to package app.
//
// Non-goals: any rule of the API or any part of the server (package app wires those); this
// package only turns a command line into an app.Config and runs it, or calls a running server.
//
// Concurrency: Run is called once per process: it installs the signal handlers and klog's
// logger, which are process-wide.
package command
