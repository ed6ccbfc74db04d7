// Package image tests opemu as it ships for a team (README, "Running opemu for a team"): the
// container image that deploy/image.sh builds from the Containerfile, run by podman as the
// compose demo (deploy/compose/compose.yaml: `opemu etcd` and three replicas on a network
// of their own) through a failover. They need podman, runc, podman-compose and CNI's dnsname
// plugin (Debian packages that .ci/run installs): without them they fail when CI is set and
// are skipped elsewhere.
//
// The containers are published on 127.0.0.1 only, on ports the test picks free; every
// container, the network and the image are removed when the test ends.
package image
