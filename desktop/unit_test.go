package desktop

import (
	"encoding/binary"
	"image"
	"image/color"
	"strings"
	"testing"
)

// xwdOf encodes img as xwd(1) writes a 24-bit TrueColor ZPixmap, 32 bits a
// pixel, in the given byte order (0 LSBFirst, 1 MSBFirst).
func xwdOf(img *image.RGBA, order uint32, pad int) []byte {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	name := []byte("xwdump\x00")
	bpl := w*4 + pad
	hdr := [25]uint32{uint32(100 + len(name)), 7, 2, 24, uint32(w), uint32(h), 0, order, 32, order, 32, 32, uint32(bpl), 4,
		0xff0000, 0xff00, 0xff, 8, 256, 0, uint32(w), uint32(h), 0, 0, 0}
	var b []byte
	for _, v := range hdr {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	b = append(b, name...)
	for y := range h {
		for x := range w {
			c := img.RGBAAt(x, y)
			v := uint32(c.R)<<16 | uint32(c.G)<<8 | uint32(c.B)
			if order == 0 {
				b = binary.LittleEndian.AppendUint32(b, v)
			} else {
				b = binary.BigEndian.AppendUint32(b, v)
			}
		}
		b = append(b, make([]byte, pad)...)
	}
	return b
}

func testImage(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, color.RGBA{uint8(x * 7), uint8(y * 13), uint8(x ^ y), 0xff})
		}
	}
	return img
}

func TestDecodeXWD(t *testing.T) {
	want := testImage(17, 9)
	for _, order := range []uint32{0, 1} {
		for _, pad := range []int{0, 4} {
			got, err := decodeXWD(xwdOf(want, order, pad))
			if err != nil {
				t.Fatalf("order %d pad %d: %v", order, pad, err)
			}
			if string(got.Pix) != string(want.Pix) {
				t.Errorf("order %d pad %d: pixels differ", order, pad)
			}
		}
	}
}

func TestDecodeXWDRefuses(t *testing.T) {
	good := xwdOf(testImage(4, 4), 0, 0)
	set := func(i int, v uint32) []byte {
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint32(b[i*4:], v)
		return b
	}
	for name, b := range map[string][]byte{
		"empty":          nil,
		"short header":   good[:50],
		"version":        set(1, 6),
		"xy pixmap":      set(2, 1),
		"pseudocolor":    set(13, 3),
		"bpp":            set(11, 8),
		"huge width":     set(4, 1<<20),
		"zero height":    set(5, 0),
		"header too big": set(0, 1<<30),
		"truncated":      good[:len(good)-1],
		"bytes per line": set(12, 3),
		"no mask":        set(14, 0),
		"many colors":    set(19, 1<<20),
	} {
		if _, err := decodeXWD(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzDecodeXWD(f *testing.F) {
	f.Add(xwdOf(testImage(3, 2), 0, 0))
	f.Add(xwdOf(testImage(2, 3), 1, 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := decodeXWD(b)
		if err != nil {
			return
		}
		if img.Rect.Dx() > MaxScreen || img.Rect.Dy() > MaxScreen || len(img.Pix) > len(b)*2 {
			t.Fatalf("an image of %v from %d bytes", img.Rect, len(b))
		}
	})
}

func TestFitAndScale(t *testing.T) {
	for _, c := range []struct{ w, h, mw, mh, vw, vh int }{
		{1280, 800, 1280, 800, 1280, 800},
		{1024, 768, 1280, 800, 1024, 768},
		{2560, 1600, 1280, 800, 1280, 800},
		{1920, 1080, 1280, 800, 1280, 720},
		{1600, 1200, 1280, 800, 1066, 800},
		{3840, 2160, 1024, 768, 1024, 576},
	} {
		vw, vh := fit(c.w, c.h, c.mw, c.mh)
		if vw != c.vw || vh != c.vh {
			t.Errorf("fit(%d, %d, %d, %d) = %d, %d; want %d, %d", c.w, c.h, c.mw, c.mh, vw, vh, c.vw, c.vh)
		}
		// Every view pixel lands on the screen, and back on itself.
		for v := 0; v < vw; v++ {
			s := toScreen(v, vw, c.w)
			if s < 0 || s >= c.w {
				t.Fatalf("toScreen(%d) = %d off a screen of %d", v, s, c.w)
			}
			if back := toView(s, c.w, vw); back != v {
				t.Fatalf("%dx%d→%d: view %d → screen %d → view %d", c.w, c.h, vw, v, s, back)
			}
		}
	}
	img := resize(testImage(40, 20), 20, 10)
	if img.Rect.Dx() != 20 || img.Rect.Dy() != 10 {
		t.Fatalf("resized to %v", img.Rect)
	}
}

func TestKeys(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"Return", "Return", ""},
		{"ctrl+s", "ctrl+s", ""},
		{"CTRL+SHIFT+T", "ctrl+shift+T", ""},
		{"ENTER", "Return", ""},
		{"ArrowLeft", "Left", ""},
		{"ctrl+a Delete", "ctrl+a Delete", ""},
		{"a", "a", ""},
		{"/", "U002F", ""},
		{"é", "U00E9", ""},
		{"ctrl++", "ctrl+plus", ""},
		{"F5", "F5", ""},
		{"Page_Down", "Page_Down", ""},
		{"super", "super", ""},
		{"--help", "", "not an X keysym"},
		{"a;b", "", "not an X keysym"},
		{"", "", "no key"},
		{"ctrl+" + strings.Repeat("x", 40), "", "too long"},
		{"a+b+c+d+e+f+g", "", "more than 6"},
		{strings.Repeat("a ", 17), "", "more than 16"},
		{"\x01", "", "not a printable"},
	} {
		got, err := parseKeys(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseKeys(%q) = %q, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != c.want {
			t.Errorf("parseKeys(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestParseAction(t *testing.T) {
	for _, c := range []struct{ args, err string }{
		{`{"action":"screenshot"}`, ""},
		{`{"action":"left_click","coordinate":[10,20]}`, ""},
		{`{"action":"left_click","coordinate":[10,20],"text":"shift"}`, ""},
		{`{"action":"left_click"}`, ""},
		{`{"action":"double_click","coordinate":[1279,799]}`, ""},
		{`{"action":"left_click","coordinate":[1280,10]}`, "outside the screen"},
		{`{"action":"left_click","coordinate":[-1,10]}`, "outside the screen"},
		{`{"action":"left_click","coordinate":[1]}`, "[x, y]"},
		{`{"action":"left_click","text":"a"}`, "not a modifier"},
		{`{"action":"mouse_move"}`, "needs coordinate"},
		{`{"action":"left_click_drag","start_coordinate":[1,1],"coordinate":[5,5]}`, ""},
		{`{"action":"left_click_drag","coordinate":[5,5],"path":[[2,2],[3,3]]}`, ""},
		{`{"action":"left_click","path":[[2,2]]}`, "takes no path"},
		{`{"action":"scroll","coordinate":[5,5],"scroll_direction":"down","scroll_amount":3}`, ""},
		{`{"action":"scroll","scroll_direction":"sideways","scroll_amount":3}`, "scroll_direction"},
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":31}`, "scroll_amount"},
		{`{"action":"type","text":"hello\nworld"}`, ""},
		{`{"action":"type","text":""}`, "needs text"},
		{`{"action":"type","text":"a\u001bb"}`, "control character"},
		{`{"action":"type","text":"` + strings.Repeat("x", MaxText+1) + `"}`, "at most"},
		{`{"action":"key","text":"ctrl+c"}`, ""},
		{`{"action":"key","text":"-rf"}`, "not an X keysym"},
		{`{"action":"hold_key","text":"shift","duration":1}`, ""},
		{`{"action":"wait","duration":31}`, "duration"},
		{`{"action":"wait","duration":2}`, ""},
		{`{"action":"zoom"}`, "unknown action"},
		{`{}`, "no action"},
		{`{"action":"screenshot","extra":1}`, "not a computer action"},
		{`[1]`, "not a computer action"},
		{`{"action":"screenshot","text":"x"}`, "takes no text"},
	} {
		_, err := ParseAction([]byte(c.args), 1280, 800)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseAction(%.80s) = %v; want %q", c.args, err, c.err)
		}
	}
}

func FuzzParseAction(f *testing.F) {
	f.Add([]byte(`{"action":"left_click","coordinate":[10,20]}`))
	f.Add([]byte(`{"action":"key","text":"ctrl+a Delete"}`))
	f.Add([]byte(`{"action":"left_click_drag","coordinate":[5,5],"path":[[2,2]]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAction(b, 640, 480)
		if err != nil {
			return
		}
		d := &Desktop{o: (&Options{}).withDefaults(), sw: 1280, sh: 960, vw: 640, vh: 480}
		if a.Action == ActScreenshot || a.Action == ActCursorPosition || a.Action == ActWait {
			return
		}
		argv, _, _, err := d.command(a)
		if err != nil {
			t.Fatalf("a checked action %s does not build: %v", b, err)
		}
		if argv[0] != "xdotool" {
			t.Fatalf("argv %q", argv)
		}
	})
}
