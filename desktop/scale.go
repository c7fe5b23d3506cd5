package desktop

import (
	"image"
)

// fit returns the size of the model's view of a screen of w×h pixels: the
// largest size within maxW×maxH with the screen's aspect ratio, never larger
// than the screen itself.
func fit(w, h, maxW, maxH int) (int, int) {
	if w <= maxW && h <= maxH {
		return w, h
	}
	// Scale by the tighter of the two ratios, rounding down so that both
	// stay within bounds.
	if w*maxH > h*maxW { // width binds
		return maxW, max(1, h*maxW/w)
	}
	return max(1, w*maxH/h), maxH
}

// resize scales src down to w×h by averaging the source pixels each
// destination pixel covers (a box filter: text stays legible, unlike
// nearest-neighbour sampling). It returns src when the size is the same.
func resize(src *image.RGBA, w, h int) *image.RGBA {
	sw, sh := src.Rect.Dx(), src.Rect.Dy()
	if sw == w && sh == h {
		return src
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		y0, y1 := y*sh/h, max((y+1)*sh/h, y*sh/h+1)
		for x := range w {
			x0, x1 := x*sw/w, max((x+1)*sw/w, x*sw/w+1)
			var r, g, b, n uint32
			for sy := y0; sy < y1; sy++ {
				row := src.Pix[(sy-src.Rect.Min.Y)*src.Stride:]
				for sx := x0; sx < x1; sx++ {
					p := row[(sx-src.Rect.Min.X)*4:]
					r += uint32(p[0])
					g += uint32(p[1])
					b += uint32(p[2])
					n++
				}
			}
			o := dst.Pix[y*dst.Stride+x*4:]
			o[0], o[1], o[2], o[3] = uint8(r/n), uint8(g/n), uint8(b/n), 0xff
		}
	}
	return dst
}

// toScreen maps a coordinate of the model's view (0 ≤ v < view) onto the
// screen: the centre of the screen pixels the view pixel covers.
func toScreen(v, view, screen int) int {
	if view == screen {
		return v
	}
	s := (2*v + 1) * screen / (2 * view)
	return min(max(s, 0), screen-1)
}

// toView maps a screen coordinate onto the model's view: the view pixel
// that covers the screen pixel's centre, so that toView(toScreen(v)) is v.
func toView(s, screen, view int) int {
	if view == screen {
		return s
	}
	return min(max((2*s+1)*view/(2*screen), 0), view-1)
}
