// Package reliability holds commitptr's reliability tests; it has no API.
//
// The tests run the commit protocol under injected faults (package
// internal/faults) on the mem driver and on the s3 driver against a real S3
// server (versitygw), and check the invariants of docs/DESIGN.md:
//
//   - linearizability_test.go records the invoke/return history of
//     concurrent commits and pointer reads and checks it with porcupine as a
//     compare-and-swap register (I2). Commits whose outcome is unknown are
//     modelled as possibly applied, at any time after their invocation.
//   - soak_test.go runs writers, snapshot readers (some pinned) and
//     read-modify-write counters together for a configurable time and
//     checks I1, I2, I3, exact counters and that no object is lost.
//   - security_test.go checks size caps on parsed bodies and that
//     credentials never appear in errors.
//
// Knobs, all environment variables:
//
//	COMMITPTR_LONG=1          long mode: ≥10,000 linearizability operations, more drivers
//	COMMITPTR_SOAK=10m        soak duration per driver (default 8s; 0 skips)
//	COMMITPTR_SEED=n          fault seed (default: fixed per test)
//	COMMITPTR_ARTIFACTS=dir   where failing histories and their HTML go
//
// docs/RELIABILITY.md has the figures and the commands that reproduce them.
package reliability
