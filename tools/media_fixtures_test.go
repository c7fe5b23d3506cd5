package tools_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"
)

// Real media files, made by the standard library's encoders where it has
// one, and by hand for WebP and PDF.

// testImage is a small picture with some structure, so that encoders have
// something to encode.
func testImage(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{R: uint8(x * 255 / max(w-1, 1)), G: uint8(y * 255 / max(h-1, 1)), B: 128, A: 255})
		}
	}
	return img
}

func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, testImage(w, h)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, testImage(w, h), &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gifBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, testImage(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bitWriter writes a VP8L bit stream: least significant bit first.
type bitWriter struct {
	buf  []byte
	acc  uint64
	nacc uint
}

func (w *bitWriter) write(v uint64, n uint) {
	w.acc |= v << w.nacc
	w.nacc += n
	for w.nacc >= 8 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc >>= 8
		w.nacc -= 8
	}
}

func (w *bitWriter) bytes() []byte {
	if w.nacc > 0 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc, w.nacc = 0, 0
	}
	return w.buf
}

// vp8lSolid returns a VP8L (lossless WebP) bit stream of a w×h image of
// one colour: no transforms, no colour cache, and five one-symbol prefix
// codes (green, red, blue, alpha, distance), so that every pixel takes zero
// bits.
func vp8lSolid(w, h int, c color.NRGBA) []byte {
	var bw bitWriter
	bw.write(0x2f, 8) // signature
	bw.write(uint64(w-1), 14)
	bw.write(uint64(h-1), 14)
	alpha := uint64(0)
	if c.A != 0xff {
		alpha = 1
	}
	bw.write(alpha, 1)
	bw.write(0, 3) // version
	bw.write(0, 1) // no transform
	bw.write(0, 1) // no colour cache
	bw.write(0, 1) // no meta prefix codes
	for _, sym := range []uint8{c.G, c.R, c.B, c.A, 0} {
		bw.write(1, 1) // simple code
		bw.write(0, 1) // one symbol
		bw.write(1, 1) // of 8 bits
		bw.write(uint64(sym), 8)
	}
	return bw.bytes()
}

// riff wraps chunks (fourCC, payload) in a WebP RIFF container.
func riff(chunks ...any) []byte {
	var body bytes.Buffer
	body.WriteString("WEBP")
	for i := 0; i < len(chunks); i += 2 {
		body.WriteString(chunks[i].(string))
		payload := chunks[i+1].([]byte)
		binary.Write(&body, binary.LittleEndian, uint32(len(payload)))
		body.Write(payload)
		if len(payload)%2 == 1 {
			body.WriteByte(0)
		}
	}
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(body.Len()))
	b.Write(body.Bytes())
	return b.Bytes()
}

// webpLossless returns a simple-format lossless WebP of w×h pixels.
func webpLossless(w, h int) []byte {
	return riff("VP8L", vp8lSolid(w, h, color.NRGBA{R: 0x20, G: 0x80, B: 0xe0, A: 0xff}))
}

// webpExtended returns an extended-format WebP (a VP8X chunk giving the
// canvas, then the image) of w×h pixels with alpha.
func webpExtended(w, h int) []byte {
	vp8x := make([]byte, 10)
	vp8x[0] = 0x10 // alpha
	put24 := func(b []byte, v int) { b[0], b[1], b[2] = byte(v), byte(v>>8), byte(v>>16) }
	put24(vp8x[4:], w-1)
	put24(vp8x[7:], h-1)
	return riff("VP8X", vp8x, "VP8L", vp8lSolid(w, h, color.NRGBA{R: 0xff, A: 0x80}))
}

// pdfBytes returns a one-page PDF that shows text, with a correct
// cross-reference table.
func pdfBytes(text string) []byte {
	content := fmt.Sprintf("BT /F1 24 Tf 20 40 Td (%s) Tj ET", text)
	objects := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, xref)
	return b.Bytes()
}

// elfBytes returns the start of a 64-bit Linux executable: its ELF header,
// padded with zeros.
func elfBytes() []byte {
	b := make([]byte, 4096)
	copy(b, "\x7fELF\x02\x01\x01\x00")
	binary.LittleEndian.PutUint16(b[16:], 2)    // ET_EXEC
	binary.LittleEndian.PutUint16(b[18:], 0x3e) // x86-64
	return b
}
