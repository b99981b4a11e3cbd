// Command gpugov-controlplane is gpugov's throw-away test control plane: one
// static binary that starts an embedded etcd on loopback and then runs the
// upstream kube-apiserver command (k8s.io/kubernetes/cmd/kube-apiserver/app)
// in the same process.
//
// Why one binary: no prebuilt Kubernetes binaries can be downloaded in CI, and
// Debian's etcd is too old for Kubernetes >= 1.34, so both are compiled from
// Go modules. Linking them together means one build, one cache entry and one
// process to supervise (no orphaned etcd when the apiserver dies).
//
// Usage:
//
//	gpugov-controlplane [--embedded-etcd-FLAG=VALUE ...] [kube-apiserver flags ...]
//
// Flags starting with --embedded-etcd- configure etcd (see parseEtcdFlags);
// every other argument goes to kube-apiserver unchanged. When no
// --etcd-servers flag is given, it is set to the embedded etcd's client URL.
// With --version (or -h/--help) etcd is not started at all.
package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	_ "time/tzdata" // as upstream's kube-apiserver main: time zones for CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

const etcdFlagPrefix = "--embedded-etcd-"

// etcdOptions holds the embedded etcd's settings.
type etcdOptions struct {
	dataDir      string        // required: etcd's own data directory
	clientPort   int           // required: loopback port for clients (the apiserver)
	peerPort     int           // required: loopback port for the (single-member) peer listener
	logLevel     string        // etcd's zap log level; "warn" keeps test logs readable
	unsafeNoSync bool          // skip fsync: much faster on CI disks, data is throw-away anyway
	readyTimeout time.Duration // how long to wait for etcd to serve
}

func main() {
	etcdArgs, apiserverArgs := splitArgs(os.Args[1:])
	if !wantsServer(apiserverArgs) {
		os.Exit(runAPIServer(apiserverArgs))
	}
	opts, err := parseEtcdFlags(etcdArgs)
	if err != nil {
		fatalf("invalid %s* flag: %v", etcdFlagPrefix, err)
	}
	etcd, err := startEtcd(opts)
	if err != nil {
		fatalf("starting embedded etcd: %v", err)
	}
	clientURL := etcd.Clients[0].Addr().String()
	if !hasFlag(apiserverArgs, "--etcd-servers") {
		apiserverArgs = append(apiserverArgs, "--etcd-servers=http://"+clientURL)
	}
	// kube-apiserver installs its own SIGTERM/SIGINT handler and returns after
	// a graceful shutdown; only then is etcd closed, so the apiserver never
	// loses its storage while it still serves.
	code := runAPIServer(apiserverArgs)
	etcd.Close()
	os.Exit(code)
}

// splitArgs separates the --embedded-etcd-* flags from kube-apiserver's.
func splitArgs(args []string) (etcdArgs, rest []string) {
	for _, arg := range args {
		if strings.HasPrefix(arg, etcdFlagPrefix) {
			etcdArgs = append(etcdArgs, strings.TrimPrefix(arg, etcdFlagPrefix))
		} else {
			rest = append(rest, arg)
		}
	}
	return etcdArgs, rest
}

// wantsServer is false for informational invocations (--version, --help),
// which must work without a data dir or ports.
func wantsServer(args []string) bool {
	for _, arg := range args {
		name, _, _ := strings.Cut(arg, "=")
		switch name {
		case "--version", "-h", "--help":
			return false
		}
	}
	return true
}

// hasFlag reports whether args contain --name or --name=value.
func hasFlag(args []string, name string) bool {
	for _, arg := range args {
		if arg == name || strings.HasPrefix(arg, name+"=") {
			return true
		}
	}
	return false
}

// parseEtcdFlags parses "name=value" pairs (prefix already stripped). Done by
// hand so these flags never touch the apiserver's global flag sets.
func parseEtcdFlags(args []string) (etcdOptions, error) {
	opts := etcdOptions{logLevel: "warn", readyTimeout: time.Minute}
	var err error
	for _, arg := range args {
		name, value, hasValue := strings.Cut(arg, "=")
		switch name {
		case "data-dir":
			opts.dataDir = value
		case "client-port":
			opts.clientPort, err = strconv.Atoi(value)
		case "peer-port":
			opts.peerPort, err = strconv.Atoi(value)
		case "log-level":
			opts.logLevel = value
		case "unsafe-no-fsync":
			opts.unsafeNoSync = !hasValue || value == "true"
		case "ready-timeout":
			opts.readyTimeout, err = time.ParseDuration(value)
		default:
			return opts, fmt.Errorf("unknown flag %s%s", etcdFlagPrefix, name)
		}
		if err != nil {
			return opts, fmt.Errorf("%s%s: %w", etcdFlagPrefix, name, err)
		}
	}
	switch {
	case opts.dataDir == "":
		return opts, errors.New(etcdFlagPrefix + "data-dir is required")
	case opts.clientPort <= 0 || opts.peerPort <= 0:
		return opts, errors.New(etcdFlagPrefix + "client-port and " + etcdFlagPrefix + "peer-port are required")
	}
	return opts, nil
}

// startEtcd starts a single-member etcd on 127.0.0.1 and waits until it serves.
func startEtcd(opts etcdOptions) (*embed.Etcd, error) {
	clientURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(opts.clientPort)}
	peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(opts.peerPort)}

	cfg := embed.NewConfig()
	cfg.Name = "gpugov"
	cfg.Dir = opts.dataDir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = opts.logLevel
	cfg.LogOutputs = []string{"stderr"}
	cfg.UnsafeNoFsync = opts.unsafeNoSync

	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-etcd.Server.ReadyNotify():
		return etcd, nil
	case err := <-etcd.Err():
		etcd.Close()
		return nil, err
	case <-time.After(opts.readyTimeout):
		etcd.Server.Stop()
		etcd.Close()
		return nil, fmt.Errorf("not ready after %s", opts.readyTimeout)
	}
}

// runAPIServer runs upstream's kube-apiserver command exactly as its own
// main() does and returns the exit code.
func runAPIServer(args []string) int {
	command := app.NewAPIServerCommand()
	command.SetArgs(args)
	return cli.Run(command)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gpugov-controlplane: "+format+"\n", args...)
	os.Exit(2)
}
