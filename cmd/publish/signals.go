package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interrupts turns SIGINT, SIGTERM, SIGHUP and SIGQUIT into a cancelled
// context. The first signal cancels it. A later one goes to the handler a command has set with
// onInterruptAgain; with none set, it ends the process as the signal's
// default action would, so a second Ctrl-C stops a command that is slow to
// clean up.
type interrupts struct {
	mu    sync.Mutex
	again func()
}

type interruptsKey struct{}

// interruptSignals are the signals that interrupt a command: a person's
// Ctrl-C, a service manager's stop, a closed terminal, Ctrl-\.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// watchInterrupts returns a context cancelled by the first of those
// signals, and a function that stops watching.
func watchInterrupts(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	in := &interrupts{}
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, interruptSignals...)
	done := make(chan struct{})
	go func() {
		first := true
		for {
			select {
			case <-done:
				return
			case sig := <-ch:
				if first {
					first = false
					cancel()
					continue
				}
				if !in.handle() {
					signal.Reset(interruptSignals...)
					syscall.Kill(os.Getpid(), sig.(syscall.Signal)) //nolint:errcheck // our own pid
				}
			}
		}
	}()
	return context.WithValue(ctx, interruptsKey{}, in), func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}

// handle runs the handler of a later signal, if one is set.
func (in *interrupts) handle() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.again == nil {
		return false
	}
	in.again()
	return true
}

// onInterruptAgain makes f the handler of every signal after the first,
// until the returned function is called. f must not block. Without
// watchInterrupts in ctx (a test calling Main), f is never called.
func onInterruptAgain(ctx context.Context, f func()) (unset func()) {
	in, _ := ctx.Value(interruptsKey{}).(*interrupts)
	if in == nil {
		return func() {}
	}
	in.mu.Lock()
	in.again = f
	in.mu.Unlock()
	return func() {
		in.mu.Lock()
		in.again = nil
		in.mu.Unlock()
	}
}
