package conformance

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// replierEnv, set in a child's environment, makes this test binary a
// replier instead: BenchmarkHold's peer in a process of its own.
const replierEnv = "CONFORMANCE_HOLD_REPLIER"

func TestMain(m *testing.M) {
	if os.Getenv(replierEnv) != "" {
		os.Exit(reply())
	}
	os.Exit(m.Run())
}

// reply listens on loopback, prints its address, and answers each byte
// its one client sends 500 µs after it came (HoldFor: on time).
func reply() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr())
	// a parent gone before it connected leaves no replier behind
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Minute))
	c, err := ln.Accept()
	if err != nil {
		return 1
	}
	buf := make([]byte, 1)
	for {
		if _, err := c.Read(buf); err != nil {
			return 0 // the benchmark is done
		}
		HoldFor(500 * time.Microsecond)
		if _, err := c.Write(buf); err != nil {
			return 0
		}
	}
}

// HoldFor holds at least as long as asked, and nothing for no time.
func TestHoldFor(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Millisecond, 300 * time.Microsecond} {
		t0 := time.Now()
		HoldFor(d)
		if got := time.Since(t0); got < d {
			t.Errorf("HoldFor(%v) returned after %v", d, got)
		}
	}
	HoldFor(0)
	HoldFor(-time.Second) // returns at once; a hang here fails the test by its timeout
}

// BenchmarkHold: a 1 ms hold while another goroutine of the process gets
// a reply from another process half-way through it, as a FIFO lock's
// waiters do while the key is held. time.Sleep's last part is rounded up
// to a whole millisecond when that reply wakes the runtime's network
// poller (golang/go#53824); HoldFor, the workloads' hold, blocks its
// thread for the time asked. hold-p50-ms is the median hold.
func BenchmarkHold(b *testing.B) {
	c := replier(b)
	for _, h := range []struct {
		name string
		hold func(time.Duration)
	}{{"time.Sleep", time.Sleep}, {"HoldFor", HoldFor}} {
		b.Run(h.name, func(b *testing.B) {
			holds := make([]time.Duration, b.N)
			buf := make([]byte, 1)
			for i := range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				replied := make(chan error, 1)
				go func() { _, err := c.Read(buf); replied <- err }()
				t0 := time.Now()
				h.hold(time.Millisecond)
				holds[i] = time.Since(t0)
				if err := <-replied; err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(holds)
			b.ReportMetric(float64(Quantile(holds, 0.5).Microseconds())/1000, "hold-p50-ms")
		})
	}
}

// replier starts this test binary as a replier and connects to it.
func replier(b *testing.B) net.Conn {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env, cmd.Stderr = append(os.Environ(), replierEnv+"=1"), os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("replier: %v", err)
	}
	c, err := net.Dial("tcp", addr[:len(addr)-1])
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}
