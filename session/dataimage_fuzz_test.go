package session

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"net/http"
	"strings"
	"testing"
)

// FuzzParseDataURI feeds arbitrary strings to the decoding of a message's
// image (parseDataURI): it never panics, and what it accepts is an image
// a model takes: of a type it takes, not empty, within the bounds, its
// bytes of that type with a sound header.
func FuzzParseDataURI(f *testing.F) {
	var b bytes.Buffer
	png.Encode(&b, image.NewGray(image.Rect(0, 0, 3, 2)))
	good := base64.StdEncoding.EncodeToString(b.Bytes())
	for _, seed := range []string{
		"data:image/png;base64," + good, "data:image/png;base64,", "data:image/png;base64,  ", "data:image/png;base64,\r\n",
		"data:image/png;base64", "data:image/png," + good, "data:text/plain;base64,aGk=", "data:image/svg+xml;base64,PHN2Zy8+",
		"data:image/gif;base64,R0lGODlhAQABAAAAACw=", "data:image/png;base64,R0lGODlhAQABAAAAACw=", "data:image/png;base64," + good[:20], "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mime, data, err := parseDataURI(s)
		if err != nil {
			if mime != "" || data != nil {
				t.Fatalf("refused (%v) but gave %q and %d bytes", err, mime, len(data))
			}
			return
		}
		if !strings.HasPrefix(s, "data:"+mime+";base64,") || !postedImageType(mime) {
			t.Fatalf("accepted %q as %s", s, mime)
		}
		if len(data) == 0 || len(data) > maxPostedImage || checkPostedImage(mime, data) != "" {
			t.Fatalf("accepted an empty, oversized or unsound %s of %d bytes", mime, len(data))
		}
	})
}

// FuzzAttachedImage feeds arbitrary bytes to the check of a message's
// file that claims to be an image (attachedImage): it never panics, it
// either shows the bytes as an image or says why not, and what it shows
// is of a type a model takes, the type the bytes read as, within the
// bounds, with a sound header.
func FuzzAttachedImage(f *testing.F) {
	var b bytes.Buffer
	png.Encode(&b, image.NewGray(image.Rect(0, 0, 3, 2)))
	for _, seed := range [][]byte{b.Bytes(), b.Bytes()[:24], []byte("hello"), []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"), []byte("RIFF\x00\x00\x00\x00WEBPVP8 "), nil} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mime, why := attachedImage(data)
		if (mime == "") == (why == "") {
			t.Fatalf("gave type %q and reason %q", mime, why)
		}
		if mime == "" {
			return
		}
		if !postedImageType(mime) || mime != http.DetectContentType(data) || len(data) > maxPostedImage || checkPostedImage(mime, data) != "" {
			t.Fatalf("showed %d bytes as %s", len(data), mime)
		}
	})
}
