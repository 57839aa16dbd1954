package faultproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echo serves one loopback echo server for the test.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

// dialProxy starts a proxy in front of an echo server and connects to it;
// both are closed when the test ends (Close twice is harmless).
func dialProxy(t *testing.T) (*Proxy, net.Conn) {
	t.Helper()
	p, err := New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return p, c
}

func TestBlackholeHoldsTrafficUntilResume(t *testing.T) {
	p, c := dialProxy(t)
	if got, err := roundTrip(c, "a", 5*time.Second); err != nil || got != "a" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Blackhole()
	if _, err := roundTrip(c, "b", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("while blackholed the call = %v, want no answer (a timeout), and no error from the connection", err)
	}
	p.Resume()
	buf := make([]byte, 1)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'b' {
		t.Fatalf("after Resume: %q, %v; want what was held back", buf, err)
	}
}

func TestCutEndsConnections(t *testing.T) {
	p, c := dialProxy(t)
	p.Cut()
	if _, err := roundTrip(c, "a", 5*time.Second); err == nil {
		t.Error("a cut connection still answers")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDropEndsConnectionsAndAcceptsNew(t *testing.T) {
	p, c := dialProxy(t)
	if got, err := roundTrip(c, "a", 5*time.Second); err != nil || got != "a" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Drop()
	if _, err := roundTrip(c, "b", 5*time.Second); err == nil {
		t.Error("a dropped connection still answers")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := roundTrip(c2, "c", 5*time.Second); err != nil || got != "c" {
		t.Errorf("a new connection after Drop: %q, %v", got, err)
	}
}

func TestDelayAddsLatencyEachWay(t *testing.T) {
	p, c := dialProxy(t)
	const d = 50 * time.Millisecond
	p.Delay(d)
	start := time.Now()
	if got, err := roundTrip(c, "a", 5*time.Second); err != nil || got != "a" {
		t.Fatalf("through the slowed proxy: %q, %v", got, err)
	}
	if rtt := time.Since(start); rtt < 2*d {
		t.Fatalf("round trip %v with %v of delay each way; want at least %v", rtt, d, 2*d)
	}
	p.Delay(0)
	if got, err := roundTrip(c, "b", 5*time.Second); err != nil || got != "b" {
		t.Fatalf("after Delay(0): %q, %v", got, err)
	}
}
