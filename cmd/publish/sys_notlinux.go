//go:build !linux

package main

// becomeSubreaper does nothing: this system has no subreapers, and the
// orphans of our descendants go to init, which reaps them.
func becomeSubreaper() error { return nil }
