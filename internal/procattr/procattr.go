// Package procattr gives the process attributes of the helper processes
// that tests start: a test server, re-executed test binaries.
package procattr
