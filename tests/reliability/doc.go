// Package reliability holds commitptr's reliability tests; it has no API.
//
// The tests run the commit protocol under injected faults (package
// internal/faults) on the mem driver and on the s3 driver against a real S3
// server (versitygw), and check the design's invariants I1–I8:
//
//   - linearizability_test.go records the invoke/return history of
//     concurrent commits and pointer reads and checks it with porcupine as a
//     compare-and-swap register (I2). Commits whose outcome is unknown are
//     modelled as possibly applied, at any time after their invocation.
//   - soak_test.go runs writers, snapshot readers (some pinned),
//     read-modify-write counters, collectors and lease contenders together
//     for a configurable time and checks I1–I5, I7, exact counters and that
//     no object is lost.
//   - crash_test.go SIGKILLs `publish put`, `publish gc` and `publish run`
//     at random points and checks I1, I2, I4 and I7 after each trial.
//   - security_test.go checks size caps on parsed bodies, that credentials
//     never appear in errors or CLI output, and the fs driver's file modes.
//   - distributed_test.go, built only with the tag "distributed", runs the
//     linearizability rounds and the soak against the endpoints of an S3
//     deployment of several processes while scripts/distributed.sh kills
//     and pauses its nodes (SeaweedFS, and versitygw gateways over one
//     directory); the script writes the report.
//   - fuzz_test.go fuzzes lease objects through lease.Status and
//     lease.TryAcquire; regressions_test.go keeps the bugs found here
//     fixed.
//
// Knobs, all environment variables:
//
//	COMMITPTR_LONG=1          long mode: 30,000 linearizability operations on mem, fs,
//	                          s3 and minio; 200 crash trials per command on fs and s3
//	COMMITPTR_SOAK=10m        soak duration per driver, drivers in parallel (default 8s; 0 skips)
//	COMMITPTR_SEED=n          fault seed (default: fixed per test)
//	COMMITPTR_ARTIFACTS=dir   where failing histories and their HTML go
//
// docs/TESTING.md has the figures and the commands that reproduce them.
package reliability
