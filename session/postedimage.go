package session

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/hrns-dev/hrns/internal/imagesize"
)

// maxPostedImageSide bounds the width and height of a posted image: the
// most the Anthropic Messages API takes (tools.MediaOptions' default).
const maxPostedImageSide = 8000

// maxPostedImage bounds a posted image, decoded: an image of a result
// or of a message.
const maxPostedImage = 8 << 20

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
	w, h, err := imagesize.Of(mediaType, data)
	if err != nil {
		return fmt.Sprintf("the image is not a sound %s: %v", mediaType, err)
	}
	if w > maxPostedImageSide || h > maxPostedImageSide {
		return fmt.Sprintf("an image must be 1 to at most %d pixels wide and high, not %dx%d", maxPostedImageSide, w, h)
	}
	return ""
}

// parseDataURI decodes the image of a message given as a data URI,
// "data:image/png;base64,....", and checks it as a result's image is
// checked: a type a model takes (PNG, JPEG, GIF or WebP), at least one
// byte and at most maxPostedImage of them, bytes that read as that type,
// a sound header within maxPostedImageSide. An image that passes none of
// this would stay in the session's transcript and fail each of its steps
// from then on (the providers refuse it, or the encoding does, as an
// image "with neither data nor URL").
func parseDataURI(s string) (string, []byte, error) {
	rest, ok := strings.CutPrefix(s, "data:")
	meta, payload, ok2 := strings.Cut(rest, ",")
	mime, isB64 := strings.CutSuffix(meta, ";base64")
	if !ok || !ok2 || !isB64 || !strings.HasPrefix(mime, "image/") {
		return "", nil, fmt.Errorf("image must be a base64 data URI (data:image/png;base64,<data>) or an http(s) URL")
	}
	if !postedImageType(mime) {
		return "", nil, fmt.Errorf("an image must be image/png, image/jpeg, image/gif or image/webp, not %q", mime)
	}
	if strings.TrimSpace(payload) == "" {
		return "", nil, fmt.Errorf("the image is empty: its data URI has no data after the comma")
	}
	if base64.StdEncoding.DecodedLen(len(payload)) > maxPostedImage {
		return "", nil, fmt.Errorf("an image must be at most %d bytes", maxPostedImage)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", nil, fmt.Errorf("image data is not base64: %v", err)
	}
	if len(data) == 0 {
		return "", nil, fmt.Errorf("the image is empty: its data decodes to no bytes")
	}
	if got := http.DetectContentType(data); got != mime {
		return "", nil, fmt.Errorf("the image's bytes are not %s (they read as %s)", mime, got)
	}
	if msg := checkPostedImage(mime, data); msg != "" {
		return "", nil, fmt.Errorf("%s", msg)
	}
	return mime, data, nil
}

// attachedImage says how a message's file that claims to be an image (of
// a type a model takes, by its media type or its name) is shown to the
// model: as an image of the type its bytes are sniffed as (a GIF named
// .jpg is shown as the GIF it is), when that is a type a model takes,
// they are at most maxPostedImage bytes and their header passes
// checkPostedImage; else mediaType is "" and why says why not. The file
// is the workspace's either way: only an image the provider cannot read
// is kept from the model, since it would stay in the transcript and fail
// each of the session's steps.
func attachedImage(data []byte) (mediaType, why string) {
	got := http.DetectContentType(data)
	if !postedImageType(got) {
		return "", fmt.Sprintf("its bytes are not a PNG, JPEG, GIF or WebP image (they read as %s)", got)
	}
	if len(data) > maxPostedImage {
		return "", fmt.Sprintf("an image shown to the model has at most %d bytes", maxPostedImage)
	}
	if msg := checkPostedImage(got, data); msg != "" {
		return "", msg
	}
	return got, ""
}

// pdfLead and pdfTail bound where a PDF's header and its last end-of-file
// marker may be: a reader (and the providers') looks for "%PDF-" in the
// first 1,024 bytes and "%%EOF" in the last 1,024.
const pdfLead, pdfTail = 1024, 1024

// attachedPDF reports whether the bytes of a message's file named or
// typed as a PDF are one a provider can read as such, and if not, why:
// text named .pdf, or a PDF cut short (no end-of-file marker), was sent
// as a document part, and the provider refused every step of the
// session.
func attachedPDF(data []byte) (ok bool, why string) {
	if !bytes.Contains(data[:min(len(data), pdfLead)], []byte("%PDF-")) {
		return false, fmt.Sprintf("its bytes are not a PDF (they read as %s)", http.DetectContentType(data))
	}
	if !bytes.Contains(data[max(0, len(data)-pdfTail):], []byte("%%EOF")) {
		return false, "the PDF is cut short (it has no end-of-file marker)"
	}
	return true, ""
}
