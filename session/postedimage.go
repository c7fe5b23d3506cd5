package session

import (
	"fmt"

	"github.com/hrns-dev/hrns/internal/imagesize"
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
	w, h, err := imagesize.Of(mediaType, data)
	if err != nil {
		return fmt.Sprintf("the image is not a sound %s: %v", mediaType, err)
	}
	if w > maxPostedImageSide || h > maxPostedImageSide {
		return fmt.Sprintf("an image in a result must be 1 to at most %d pixels wide and high, not %dx%d", maxPostedImageSide, w, h)
	}
	return ""
}
