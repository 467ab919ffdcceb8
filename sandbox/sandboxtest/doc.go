// Package sandboxtest is the conformance suite every sandbox driver passes:
// local, docker, ssh and, where meaningful, fake. A driver's own test calls
// Run with a function opening the driver and the capabilities it has. The
// Files subtests round-trip empty, 1 MiB random and 20 MiB files and a name
// that is not valid UTF-8, and check ranges, errors and relative paths.
//
// It imports only sandbox and the standard library (testing); it must not
// import pipeline, stages or any driver.
package sandboxtest
