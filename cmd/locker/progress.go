package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-isatty"
)

// progress draws a one-line bar on stderr while a bench runs, only when
// stderr is a terminal (a redirected stderr gets no control characters).
type progress struct {
	w     io.Writer
	label string
	total int64
	n     atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newProgress(w io.Writer, label string, total int) *progress {
	p := &progress{w: w, label: label, total: int64(total), stop: make(chan struct{})}
	if f, ok := w.(*os.File); !ok || !isatty.IsTerminal(f.Fd()) {
		return p // counts, draws nothing
	}
	p.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.draw()
			case <-p.stop:
				fmt.Fprint(p.w, "\r\033[K") // clear the line for the table
				return
			}
		}
	})
	return p
}

func (p *progress) add(n int) { p.n.Add(int64(n)) }

func (p *progress) draw() {
	const width = 30
	n := min(p.n.Load(), p.total)
	filled := int(width * n / max(1, p.total))
	fmt.Fprintf(p.w, "\r%-28s [%s%s] %d/%d", p.label, strings.Repeat("#", filled), strings.Repeat(".", width-filled), n, p.total)
}

func (p *progress) finish() {
	close(p.stop)
	p.wg.Wait()
}
