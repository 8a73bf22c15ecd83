package main

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

var palette = []string{"#3b6fb6", "#e08a1e", "#4f9a4f", "#b14a4a", "#7a5bb1", "#777777"}

// bar is one bar of a group.
type bar struct {
	series int
	value  float64
}

// draw renders p from the runs, or reports false when no run has its data.
// Groups are the family's sub-benchmark parameters in the order first seen;
// series are p's metrics times the runs (labelled by run when there are
// several).
func draw(p plot, runs []run1) (string, bool) {
	var groups []string
	values := map[string][]bar{}
	var legend []string
	for ri, r := range runs {
		for si, s := range p.series {
			idx := ri*len(p.series) + si
			name := s.label
			if len(runs) > 1 && r.label != "" {
				name += " (" + r.label + ")"
			}
			legend = append(legend, name)
			for _, res := range r.results {
				v, ok := res.metrics[s.unit]
				if res.family != p.family || !ok {
					continue
				}
				g := res.param
				if s.kind != "" {
					rest, ok := strings.CutSuffix("/"+g, "/"+s.kind)
					if !ok {
						continue
					}
					g = strings.TrimPrefix(rest, "/")
				}
				if p.group != "" && g != p.group {
					continue
				}
				if _, seen := values[g]; !seen {
					groups = append(groups, g)
				}
				values[g] = append(values[g], bar{series: idx, value: v})
			}
		}
	}
	if len(groups) == 0 {
		return "", false
	}
	maxV := 0.0
	for _, bs := range values {
		for _, b := range bs {
			maxV = max(maxV, b.value)
		}
	}
	step, top := ticks(maxV)

	const (
		left, right, plotTop, plotH = 90, 30, 64, 260
		barW, gap                   = 34, 6
	)
	nSeries := len(legend)
	groupW := nSeries*(barW+gap) + 40
	// Wide enough for the title and the legend too (bold 14 px: under 8.8 px a character).
	plotW := max(len(groups)*groupW, 360, int(8.8*float64(len(p.title)))+24-left-right)
	for _, name := range legend {
		plotW = max(plotW, int(7*float64(len(name)))+20-right)
	}
	width := left + plotW + right
	legendTop := plotTop + plotH + 56
	height := legendTop + 20*nSeries + 12

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="#fff"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="14" font-weight="bold">%s</text>`+"\n", 12, esc(p.title))
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#555">from %s</text>`+"\n", 12, esc("Benchmark"+p.family+" (make bench)"))

	// Value axis: gridlines, ticks and the unit.
	y := func(v float64) float64 { return float64(plotTop+plotH) - v/top*float64(plotH) }
	for v := 0.0; v <= top*1.0000001; v += step {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e3e3"/>`+"\n", left, y(v), left+plotW, y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", left-6, y(v)+4, num(v))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", left, plotTop, left, plotTop+plotH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", left, plotTop+plotH, left+plotW, plotTop+plotH)
	fmt.Fprintf(&b, `<text transform="translate(%d,%d) rotate(-90)" text-anchor="middle" fill="#333">%s</text>`+"\n", 22, plotTop+plotH/2, esc(p.axis))

	// Bars, grouped by parameter, each labelled with its value.
	slot := plotW / len(groups)
	for gi, g := range groups {
		bs := values[g]
		x0 := left + gi*slot + (slot-len(bs)*(barW+gap)+gap)/2
		for i, bb := range bs {
			x := x0 + i*(barW+gap)
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"/>`+"\n", x, y(bb.value), barW, float64(plotTop+plotH)-y(bb.value), palette[bb.series%len(palette)])
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="middle" font-size="11">%s</text>`+"\n", x+barW/2, y(bb.value)-4, num(bb.value))
		}
		if g != "" {
			_, v, _ := strings.Cut(g, "=")
			if v == "" {
				v = g
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#333">%s</text>`+"\n", left+gi*slot+slot/2, plotTop+plotH+18, esc(v))
		}
	}
	if p.xaxis != "" {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#333">%s</text>`+"\n", left+plotW/2, plotTop+plotH+38, esc(p.xaxis))
	}
	for i, name := range legend {
		ly := legendTop + i*20
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="14" fill="%s"/>`+"\n", left, ly, palette[i%len(palette)])
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left+20, ly+11, esc(name))
	}
	b.WriteString("</svg>\n")
	return b.String(), true
}

// ticks returns a round step and the axis top for values up to maxV.
func ticks(maxV float64) (step, top float64) {
	if maxV <= 0 {
		return 1, 1
	}
	raw := maxV / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	return step, math.Ceil(maxV/step) * step
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

func esc(s string) string { return html.EscapeString(s) }
