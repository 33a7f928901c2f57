package faults

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Stall is how a stalled endpoint fails to answer.
type Stall int

const (
	// StallAnswer accepts connections and never sends a byte.
	StallAnswer Stall = iota
	// StallBody answers every request with 200 headers announcing a body,
	// sends its first bytes and then nothing more.
	StallBody
)

// Stalled starts an endpoint on 127.0.0.1 that stalls as mode says and
// returns its URL, http://127.0.0.1:port. It reads the requests it gets
// (so an upload is not held up by a full socket buffer) and drops every
// connection when the test ends.
func Stalled(t testing.TB, mode Stall) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("stalled endpoint: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go stall(c, mode)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// stall serves one connection until it is closed.
func stall(c net.Conn, mode Stall) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if mode == StallBody {
		now := time.Now().UTC().Format(http.TimeFormat)
		_, err = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\n"+
			"Date: "+now+"\r\nLast-Modified: "+now+"\r\nETag: \"stalled\"\r\n"+
			"Content-Length: 4096\r\n\r\n<?xml version=\"1.0\"")
		if err != nil {
			return
		}
	}
	// Take in the request body and whatever follows, answering nothing.
	// The stall ends when either side closes: how the reads end cannot matter.
	_, _ = io.Copy(io.Discard, req.Body)
	_, _ = io.Copy(io.Discard, br)
}
