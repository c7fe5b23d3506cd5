// Package imagesize reads an image's width and height from its header,
// which checks that the header is sound: PNG, JPEG and GIF with the
// standard library's decoders, WebP from its first chunk (the standard
// library has no WebP decoder). It is what tools' upload_media and the
// images posted in sessions' tool results and messages check before a
// model sees them.
package imagesize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
)

// Of returns the width and height of the image b of the media type
// (image/png, image/jpeg, image/gif or image/webp), read from its header;
// an image of no pixels, of another type or whose header does not read
// as one of its type is an error.
func Of(mediaType string, b []byte) (w, h int, err error) {
	var cfg image.Config
	switch mediaType {
	case "image/png":
		cfg, err = png.DecodeConfig(bytes.NewReader(b))
	case "image/jpeg":
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(b))
	case "image/gif":
		cfg, err = gif.DecodeConfig(bytes.NewReader(b))
	case "image/webp":
		cfg.Width, cfg.Height, err = WebP(b)
	default:
		return 0, 0, fmt.Errorf("not an image type: %s", mediaType)
	}
	if err != nil {
		return 0, 0, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, fmt.Errorf("it has no pixels (%dx%d)", cfg.Width, cfg.Height)
	}
	return cfg.Width, cfg.Height, nil
}

// WebP reads a WebP image's canvas size from its first chunk: VP8
// (lossy), VP8L (lossless) or VP8X (extended).
func WebP(b []byte) (w, h int, err error) {
	if len(b) < 30 {
		return 0, 0, errors.New("it is too short to be a WebP image")
	}
	if size := int64(binary.LittleEndian.Uint32(b[4:8])) + 8; size > int64(len(b)) {
		return 0, 0, fmt.Errorf("its RIFF header gives %d bytes but the file has %d: it is cut short", size, len(b))
	}
	p := b[20:] // the first chunk's payload
	switch string(b[12:16]) {
	case "VP8 ":
		if p[3] != 0x9d || p[4] != 0x01 || p[5] != 0x2a {
			return 0, 0, errors.New("its VP8 frame has no start code")
		}
		w = int(binary.LittleEndian.Uint16(p[6:8]) & 0x3fff)
		h = int(binary.LittleEndian.Uint16(p[8:10]) & 0x3fff)
	case "VP8L":
		if p[0] != 0x2f {
			return 0, 0, errors.New("its VP8L stream has no signature")
		}
		bits := binary.LittleEndian.Uint32(p[1:5])
		w = int(bits&0x3fff) + 1
		h = int(bits>>14&0x3fff) + 1
	case "VP8X":
		w = int(p[4]) | int(p[5])<<8 | int(p[6])<<16 + 1
		h = int(p[7]) | int(p[8])<<8 | int(p[9])<<16 + 1
	default:
		return 0, 0, fmt.Errorf("its first chunk is %q, not VP8, VP8L or VP8X", b[12:16])
	}
	if w == 0 || h == 0 {
		return 0, 0, fmt.Errorf("it has no pixels (%dx%d)", w, h)
	}
	return w, h, nil
}
