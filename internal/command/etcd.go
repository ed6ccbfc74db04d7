package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd is `opemu etcd`: a one-member etcd embedded from go.etcd.io/etcd/server/v3/embed (the
// real etcd, not an imitation), with etcd's own flag names and defaults, serving until SIGINT
// or SIGTERM (SPEC §12). It exists so a demo of STORE=etcd needs nothing else installed.
func runEtcd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("opemu etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "default", "human-readable name for this member")
	dataDir := fs.String("data-dir", "", "path to the data directory (default ${name}.etcd)")
	clientURLs := fs.String("listen-client-urls", "http://localhost:2379", "comma-separated URLs to listen on for client traffic (also advertised)")
	peerURLs := fs.String("listen-peer-urls", "http://localhost:2380", "comma-separated URLs to listen on for peer traffic (also advertised)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn, error, panic or fatal")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n  opemu etcd [--data-dir DIR] [--listen-client-urls URLS] [--listen-peer-urls URLS]\n\n"+
			"Runs a one-member etcd (embedded go.etcd.io/etcd/server/v3) for STORE=etcd.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	if cfg.Dir == "" {
		cfg.Dir = *name + ".etcd"
	}
	cfg.LogLevel = *logLevel
	var err error
	if cfg.ListenClientUrls, cfg.AdvertiseClientUrls, err = listenURLs(*clientURLs); err != nil {
		fmt.Fprintf(stderr, "opemu etcd: invalid --listen-client-urls: %v\n", err)
		return 2
	}
	if cfg.ListenPeerUrls, cfg.AdvertisePeerUrls, err = listenURLs(*peerURLs); err != nil {
		fmt.Fprintf(stderr, "opemu etcd: invalid --listen-peer-urls: %v\n", err)
		return 2
	}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "opemu etcd: %v\n", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		fmt.Fprintf(stderr, "opemu etcd: %v\n", err)
		return 1
	case <-sig:
		return 0
	case <-time.After(time.Minute):
		fmt.Fprintln(stderr, "opemu etcd: not ready within a minute")
		return 1
	}
	var clients []string
	for _, u := range cfg.AdvertiseClientUrls {
		clients = append(clients, u.String())
	}
	fmt.Fprintf(stdout, "etcd ready client-urls=%s data-dir=%s\n", strings.Join(clients, ","), cfg.Dir)
	select {
	case err := <-e.Err():
		fmt.Fprintf(stderr, "opemu etcd: %v\n", err)
		return 1
	case <-sig:
		return 0
	}
}

// listenURLs parses comma-separated listen URLs; each is advertised as given, except that an
// unspecified host (0.0.0.0, [::]) is advertised as localhost.
func listenURLs(s string) (listen, advertise []url.URL, err error) {
	for _, part := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" {
			return nil, nil, fmt.Errorf("%q is not a URL like http://localhost:2379", part)
		}
		listen = append(listen, *u)
		a := *u
		if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
			a.Host = net.JoinHostPort("localhost", u.Port())
		}
		advertise = append(advertise, a)
	}
	return listen, advertise, nil
}
