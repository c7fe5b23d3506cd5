package session

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

// maxPostedImageSide bounds the width and height of a posted image: the
// most the Anthropic Messages API takes (tools.MediaOptions' default).
const maxPostedImageSide = 8000

// postedImageType reports whether a posted image may be of the media type.
func postedImageType(t string) bool {
	switch t {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// checkPostedImage says what is wrong with the bytes of a posted image of
// the media type (which their first bytes were sniffed as), "" when
// nothing: its header must read as one of that type, with at least one
// pixel and at most maxPostedImageSide a side. Sniffing reads only a
// signature, and an image the provider cannot read would fail the
// session's next step, and each one after: it stays in the transcript.
func checkPostedImage(mediaType string, data []byte) string {
	var cfg image.Config
	var err error
	switch mediaType {
	case "image/png":
		cfg, err = png.DecodeConfig(bytes.NewReader(data))
	case "image/jpeg":
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(data))
	case "image/gif":
		cfg, err = gif.DecodeConfig(bytes.NewReader(data))
	case "image/webp":
		cfg.Width, cfg.Height, err = webpSize(data)
	default:
		err = errors.New("not an image type")
	}
	if err != nil {
		return fmt.Sprintf("the image is not a sound %s: %v", mediaType, err)
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > maxPostedImageSide || cfg.Height > maxPostedImageSide {
		return fmt.Sprintf("an image in a result must be 1 to at most %d pixels wide and high, not %dx%d", maxPostedImageSide, cfg.Width, cfg.Height)
	}
	return ""
}

// webpSize reads a WebP image's canvas size from its first chunk (VP8,
// VP8L or VP8X), as tools' upload_media does: the standard library has
// no WebP decoder, and the header is what is checked.
func webpSize(b []byte) (w, h int, err error) {
	if len(b) < 30 {
		return 0, 0, errors.New("it is too short to be a WebP image")
	}
	if size := int64(binary.LittleEndian.Uint32(b[4:8])) + 8; size > int64(len(b)) {
		return 0, 0, fmt.Errorf("its RIFF header gives %d bytes but there are %d: it is cut short", size, len(b))
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
	return w, h, nil
}
