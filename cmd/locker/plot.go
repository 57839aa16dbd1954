package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// plotPanel is one chart of the plot: a figure of every backend.
type plotPanel struct {
	title string
	value func(benchResult) float64
	unit  string
}

var plotColors = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"}

const (
	panelW, panelH = 300, 240
	plotTop        = 40
	plotBottom     = 30
	legendLine     = 18
)

// plotSVG draws the bench results as three bar charts side by side, one per
// figure that matters (lower or higher is better, as titled), one bar per
// backend in the same color across the charts.
func plotSVG(results []benchResult, cfg benchConfig) string {
	panels := []plotPanel{
		{"lock+unlock p50 (ms, lower is better)", func(r benchResult) float64 { return r.LockUnlockP50 }, "%.2f"},
		{fmt.Sprintf("contended ops/s, %d workers (higher is better)", cfg.workers), func(r benchResult) float64 { return r.OpsPerSec }, "%.0f"},
		{"p99 wait (ms, lower is better)", func(r benchResult) float64 { return r.WaitP99 }, "%.1f"},
	}
	var ok []benchResult
	for _, r := range results {
		if r.Error == "" {
			ok = append(ok, r)
		}
	}
	width := panelW * len(panels)
	height := plotTop + panelH + plotBottom + legendLine*len(ok) + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" text-anchor="middle" font-size="14" font-weight="bold">locker bench: %d ops, %d workers, hold %v</text>`+"\n",
		width/2, cfg.ops, cfg.workers, cfg.hold)
	for pi, p := range panels {
		plotPanelSVG(&b, p, pi*panelW, ok)
	}
	for i, r := range ok {
		y := plotTop + panelH + plotBottom + legendLine*i
		fmt.Fprintf(&b, `<rect x="20" y="%d" width="12" height="12" fill="%s"/>`, y-10, plotColors[i%len(plotColors)])
		fmt.Fprintf(&b, `<text x="38" y="%d">%s</text>`+"\n", y, html.EscapeString(r.Label))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// plotPanelSVG draws one panel's title, axis and bars at x0.
func plotPanelSVG(b *strings.Builder, p plotPanel, x0 int, ok []benchResult) {
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x0+panelW/2, plotTop-4, html.EscapeString(p.title))
	top := float64(plotTop + 14)
	chartH := float64(panelH - 20)
	maxV := 0.0
	for _, r := range ok {
		maxV = math.Max(maxV, p.value(r))
	}
	if maxV == 0 {
		maxV = 1
	}
	n := max(1, len(ok))
	slot := float64(panelW-40) / float64(n)
	barW := slot * 0.7
	base := top + chartH
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333"/>`+"\n", x0+20, base, x0+panelW-20, base)
	for i, r := range ok {
		v := p.value(r)
		h := chartH * 0.9 * v / maxV
		x := float64(x0+20) + slot*float64(i) + (slot-barW)/2
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: `+p.unit+`</title></rect>`+"\n",
			x, base-h, barW, h, plotColors[i%len(plotColors)], html.EscapeString(r.Label), v)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">`+p.unit+`</text>`+"\n", x+barW/2, base-h-4, v)
	}
}
