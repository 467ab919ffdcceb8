// Package sandboxtest is the conformance suite every sandbox driver passes:
// local, docker, ssh and, where meaningful, fake. A driver's own test calls
// Run with a function opening the driver and the capabilities it has.
//
// It imports only sandbox and the standard library (testing); it must not
// import pipeline, stages or any driver.
package sandboxtest
