package desktop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"math/bits"
)

// MaxScreen bounds the screens this package reads: a screenshot of a larger
// one is refused, so that decoding one allocates at most 8192×8192×4 bytes.
const MaxScreen = 8192

// xwdHeaderSize is the fixed part of an XWD header: 25 32-bit fields.
const xwdHeaderSize = 100

// decodeXWD decodes an X window dump as xwd(1) writes it (format version 7,
// a ZPixmap of 16, 24 or 32 bits per pixel on a TrueColor or DirectColor
// visual: what Xvfb and every current X server give) into an RGBA image.
// Anything else, and anything truncated or inconsistent, is an error: the
// bytes come from a process of the desktop, which is untrusted.
func decodeXWD(b []byte) (*image.RGBA, error) {
	if len(b) < xwdHeaderSize {
		return nil, errors.New("xwd: shorter than its header")
	}
	var h [25]uint32
	for i := range h {
		h[i] = binary.BigEndian.Uint32(b[i*4:])
	}
	headerSize, version, format, _ := h[0], h[1], h[2], h[3]
	width, height := h[4], h[5]
	byteOrder, bpp, bpl, class := h[7], h[11], h[12], h[13]
	masks := [3]uint32{h[14], h[15], h[16]}
	ncolors := h[19]
	switch {
	case version != 7:
		return nil, fmt.Errorf("xwd: format version %d, want 7", version)
	case format != 2:
		return nil, fmt.Errorf("xwd: pixmap format %d, want ZPixmap (2)", format)
	case class != 4 && class != 5:
		return nil, fmt.Errorf("xwd: visual class %d, want TrueColor or DirectColor", class)
	case bpp != 16 && bpp != 24 && bpp != 32:
		return nil, fmt.Errorf("xwd: %d bits per pixel", bpp)
	case width == 0 || height == 0 || width > MaxScreen || height > MaxScreen:
		return nil, fmt.Errorf("xwd: size %dx%d out of bounds", width, height)
	case byteOrder > 1:
		return nil, fmt.Errorf("xwd: byte order %d", byteOrder)
	case headerSize < xwdHeaderSize || uint64(headerSize) > uint64(len(b)):
		return nil, fmt.Errorf("xwd: header size %d", headerSize)
	case ncolors > 1<<16:
		return nil, fmt.Errorf("xwd: %d colors", ncolors)
	}
	for _, m := range masks {
		if m == 0 || bits.OnesCount32(m) > 16 {
			return nil, fmt.Errorf("xwd: color masks %#x", masks)
		}
	}
	bytesPP := uint64(bpp / 8)
	if uint64(bpl) < uint64(width)*bytesPP || uint64(bpl) > uint64(width)*bytesPP+64 {
		return nil, fmt.Errorf("xwd: %d bytes per line for %d pixels", bpl, width)
	}
	start := uint64(headerSize) + uint64(ncolors)*12
	need := start + uint64(bpl)*uint64(height)
	if need > uint64(len(b)) {
		return nil, fmt.Errorf("xwd: %d bytes of pixels, want %d", uint64(len(b))-min(start, uint64(len(b))), need-start)
	}
	var shift, width8 [3]uint
	for i, m := range masks {
		shift[i] = uint(bits.TrailingZeros32(m))
		width8[i] = uint(bits.OnesCount32(m))
	}
	img := image.NewRGBA(image.Rect(0, 0, int(width), int(height)))
	data := b[start:need]
	for y := 0; y < int(height); y++ {
		row := data[y*int(bpl):]
		out := img.Pix[y*img.Stride:]
		for x := 0; x < int(width); x++ {
			p := row[x*int(bytesPP):]
			var v uint32
			switch {
			case bpp == 32 && byteOrder == 0:
				v = binary.LittleEndian.Uint32(p)
			case bpp == 32:
				v = binary.BigEndian.Uint32(p)
			case bpp == 24 && byteOrder == 0:
				v = uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16
			case bpp == 24:
				v = uint32(p[2]) | uint32(p[1])<<8 | uint32(p[0])<<16
			case byteOrder == 0:
				v = uint32(binary.LittleEndian.Uint16(p))
			default:
				v = uint32(binary.BigEndian.Uint16(p))
			}
			for c := range 3 {
				out[x*4+c] = scale8((v&masks[c])>>shift[c], width8[c])
			}
			out[x*4+3] = 0xff
		}
	}
	return img, nil
}

// scale8 widens or narrows a color component of n bits to 8.
func scale8(v uint32, n uint) uint8 {
	if n == 8 {
		return uint8(v)
	}
	max := uint32(1)<<n - 1
	return uint8((v*255 + max/2) / max)
}
