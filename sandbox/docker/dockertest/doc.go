// Package dockertest finds or starts the docker daemon for integration tests
// of the docker sandbox and the image pre-flight, and names the test image.
//
// Tests skip only when the dockerd binary is absent, and fail instead when
// the CI variable is set. When no daemon answers, the first test starts one
// with scripts/dockerd.sh; the last test process using it stops it again
// (test binaries of several packages share it through a lock file).
//
// It imports the moby client and the standard library; only tests import it.
package dockertest
