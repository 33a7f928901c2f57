// Command wanproxy runs the delaying proxy of package wanproxy in front of
// a server, for the WAN benchmark of scripts/bench.sh:
//
//	wanproxy -listen 127.0.0.1:9100 -target http://127.0.0.1:9000 -delay 10ms -log requests.log
//
// It prints the proxy's URL on stdout once it listens, and runs until it is
// interrupted.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/commitptr/commitptr/internal/wanproxy"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	target := flag.String("target", "", "the server's base URL, http://host:port")
	delay := flag.Duration("delay", 10*time.Millisecond, "delay each way: before each request is forwarded and before each response is returned")
	logPath := flag.String("log", "", "append a line per request forwarded and per response returned to this file")
	flag.Parse()
	if *target == "" {
		fmt.Fprintln(os.Stderr, "wanproxy: -target is required")
		os.Exit(2)
	}
	var logTo io.Writer
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "wanproxy:", err)
			os.Exit(1)
		}
		defer f.Close()
		logTo = f
	}
	p, err := wanproxy.Start(*listen, *target, *delay, logTo)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(p.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	p.Close()
}
