package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/hrns-dev/hrns/internal/imagesize"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// MediaOptions configure upload_media, built by [Media] and [MediaIn]. A nil
// *MediaOptions, and the zero value of each field, mean the documented
// defaults.
type MediaOptions struct {
	// MaxImageBytes is the largest image sent, in bytes. 0 means 3.75 MiB:
	// 5 MiB once base64-encoded, the most the Anthropic Messages API takes
	// for one image.
	MaxImageBytes int64
	// MaxPDFBytes is the largest PDF sent, in bytes. 0 means 20 MiB.
	MaxPDFBytes int64
	// MaxImageSide is the largest width or height of an image, in pixels.
	// 0 means 8000, the most the Anthropic Messages API takes.
	MaxImageSide int
	// AllowHardLinks lets upload_media send a file that has other hard
	// links, as FilesOptions.AllowHardLinks does for the file tools. By
	// default such a file is refused: it may be the same file as one
	// outside the directory.
	AllowHardLinks bool
}

func (o *MediaOptions) withDefaults() MediaOptions {
	var v MediaOptions
	if o != nil {
		v = *o
	}
	if v.MaxImageBytes <= 0 {
		v.MaxImageBytes = 3840 << 10
	}
	if v.MaxPDFBytes <= 0 {
		v.MaxPDFBytes = 20 << 20
	}
	if v.MaxImageSide <= 0 {
		v.MaxImageSide = 8000
	}
	return v
}

// Media returns the upload_media tool, confined to the directory dir.
//
// dir is opened once as an [os.Root], which stays open for the life of the
// program; use [MediaIn] to own the root instead.
func Media(dir string, opts *MediaOptions) (*loop.Toolset, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: opening the media root: %w", err)
	}
	return MediaIn(root, opts), nil
}

// MediaIn returns the upload_media tool, confined to root. The caller keeps
// root open while the toolset is in use.
//
// upload_media shows the model an image (PNG, JPEG, GIF or WebP) or a PDF
// as an attachment: its output holds a text part naming the file, its type
// and size, then an [llm.ImagePart] or [llm.DocumentPart] with the bytes.
// The type is judged from the content, never from the name; other types,
// empty or damaged files, and files over the size caps are refused with an
// error the model reads. Paths are confined as for [FilesIn].
//
// upload_media is Concurrent and needs no approval: it only reads. Whether
// the model can take the attachment depends on the provider: see the
// package documentation.
func MediaIn(root *os.Root, opts *MediaOptions) *loop.Toolset {
	m := &mediaTool{c: newConfined(root), o: opts.withDefaults()}
	return loop.MustToolset(m.tool())
}

type mediaTool struct {
	c *confined
	o MediaOptions
}

type uploadMediaArgs struct {
	Path string `json:"path" jsonschema:"the image or PDF to show, relative to the working directory"`
}

// accepted names the accepted types, for descriptions and refusals.
const accepted = "PNG, JPEG, GIF and WebP images and PDF documents"

func (m *mediaTool) tool() *loop.ToolDef {
	desc := fmt.Sprintf("Shows you an image or a PDF document from the working directory as an attachment, "+
		"so that you can look at it yourself: the result holds the file itself, not a description of it. "+
		"Accepts %s; the type is judged from the file's content, not its name, and other files are refused. "+
		"Images may be up to %s and %d pixels wide or high, PDFs up to %s.",
		accepted, humanSize(m.o.MaxImageBytes), m.o.MaxImageSide, humanSize(m.o.MaxPDFBytes))
	def := loop.NewTool("upload_media", desc, func(ctx context.Context, in uploadMediaArgs) (*loop.Output, error) {
		return m.upload(ctx, in)
	})
	def.Concurrent = true
	def.Access, def.Subject = loop.AccessRead, pathSubject
	return def
}

// mediaType is an accepted type.
type mediaType struct {
	mime  string // as sent to the provider
	label string // as shown to the model
	ext   string // the usual extension, to notice a misleading name
	pdf   bool
}

var (
	typePNG  = mediaType{mime: "image/png", label: "PNG image", ext: ".png"}
	typeJPEG = mediaType{mime: "image/jpeg", label: "JPEG image", ext: ".jpg"}
	typeGIF  = mediaType{mime: "image/gif", label: "GIF image", ext: ".gif"}
	typeWebP = mediaType{mime: "image/webp", label: "WebP image", ext: ".webp"}
	typePDF  = mediaType{mime: "application/pdf", label: "PDF document", ext: ".pdf", pdf: true}
)

// mediaHead is how much of a file is read to judge its type: what
// http.DetectContentType looks at.
const mediaHead = 512

func (m *mediaTool) upload(ctx context.Context, in uploadMediaArgs) (*loop.Output, error) {
	if in.Path == "" {
		return nil, errors.New("path is required")
	}
	rel, err := m.c.rel(in.Path)
	if err != nil {
		return nil, err
	}
	// Look before opening, so a device is not opened at all; but what
	// counts is the open file, since the path can change in between: it
	// is opened non-blocking, so a FIFO put there meanwhile is not waited
	// on, and checked again through the handle.
	info, err := m.c.root.Stat(rel)
	if err != nil {
		return nil, m.c.explain(in.Path, err)
	}
	if err := m.checkFile(in.Path, info); err != nil {
		return nil, err
	}
	if beforeOpen != nil {
		beforeOpen(rel)
	}
	file, err := m.c.root.OpenFile(rel, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, m.c.explain(in.Path, err)
	}
	defer file.Close()
	if info, err = file.Stat(); err != nil {
		return nil, m.c.explain(in.Path, err)
	}
	if err := m.checkFile(in.Path, info); err != nil {
		return nil, err // replaced since the first look
	}

	head := make([]byte, mediaHead)
	n, err := io.ReadFull(file, head)
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, m.c.explain(in.Path, err)
	}
	head = head[:n]
	typ, err := sniffMedia(in.Path, head)
	if err != nil {
		return nil, err
	}
	limit := m.o.MaxImageBytes
	if typ.pdf {
		limit = m.o.MaxPDFBytes
	}
	if info.Size() > limit {
		kind := "an image"
		if typ.pdf {
			kind = "a PDF"
		}
		return nil, fmt.Errorf("%s is a %s of %s, more than upload_media sends (%s for %s)",
			in.Path, typ.label, humanSize(info.Size()), humanSize(limit), kind)
	}
	// Read the rest, never more than the cap, even if the file grew.
	data := bytes.NewBuffer(make([]byte, 0, info.Size()+1))
	data.Write(head)
	if _, err := io.Copy(data, io.LimitReader(file, limit+1-int64(len(head)))); err != nil {
		return nil, m.c.explain(in.Path, err)
	}
	if int64(data.Len()) > limit {
		return nil, fmt.Errorf("%s grew past %s while it was read; try again when it is complete", in.Path, humanSize(limit))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := data.Bytes()

	desc := fmt.Sprintf("%s: %s, %s", in.Path, typ.label, humanSize(int64(len(b))))
	var part llm.Part
	if typ.pdf {
		if err := checkPDF(b); err != nil {
			return nil, fmt.Errorf("%s starts like a PDF but %v", in.Path, err)
		}
		part = llm.DocumentPart(typ.mime, path.Base(rel), b)
	} else {
		w, h, err := imagesize.Of(typ.mime, b)
		if err != nil {
			return nil, fmt.Errorf("%s starts like a %s but cannot be read as one: %v", in.Path, typ.label, err)
		}
		if w > m.o.MaxImageSide || h > m.o.MaxImageSide {
			return nil, fmt.Errorf("%s is %dx%d pixels, more than upload_media sends (%d pixels wide or high)", in.Path, w, h, m.o.MaxImageSide)
		}
		desc = fmt.Sprintf("%s: %s, %dx%d pixels, %s", in.Path, typ.label, w, h, humanSize(int64(len(b))))
		part = llm.ImagePart(typ.mime, b)
	}
	return &loop.Output{Content: []llm.Part{llm.TextPart(desc + " (attached)"), part}}, nil
}

// checkFile refuses what is not a non-empty regular file.
func (m *mediaTool) checkFile(name string, info os.FileInfo) error {
	switch {
	case info.IsDir():
		return fmt.Errorf("%s is a directory, not a file", name)
	case !info.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", name)
	case info.Size() == 0:
		return fmt.Errorf("%s is empty", name)
	case linkCount(info) > 1 && !m.o.AllowHardLinks:
		return fmt.Errorf("%s has %d hard links: it may be the same file as one outside the directory, so upload_media refuses it (the operator can allow hard links with MediaOptions.AllowHardLinks)", name, linkCount(info))
	}
	return nil
}

// sniffMedia judges the type of a file from its first bytes. A type that is
// not accepted is refused with a message naming what the content looks like
// and what is accepted.
func sniffMedia(name string, head []byte) (mediaType, error) {
	var typ mediaType
	detected := http.DetectContentType(head)
	switch {
	case bytes.HasPrefix(head, []byte("%PDF-")):
		typ = typePDF
	case len(head) >= 16 && string(head[:4]) == "RIFF" && string(head[8:15]) == "WEBPVP8":
		typ = typeWebP
	case detected == "image/png":
		typ = typePNG
	case detected == "image/jpeg":
		typ = typeJPEG
	case detected == "image/gif":
		typ = typeGIF
	default:
		what := detected
		switch {
		case isSVG(head):
			what = "an SVG image, which is XML text, not a raster image"
		case strings.HasPrefix(detected, "text/"):
			what = "text (" + detected + ")"
		case isExecutable(head):
			what = "an executable program"
		case detected == "application/octet-stream":
			what = "binary data of an unknown type"
		}
		hint := ""
		if t, ok := typeByExt(name); ok {
			hint = fmt.Sprintf(", not a %s as its name suggests (the content counts, not the name)", t.label)
		}
		return mediaType{}, fmt.Errorf("%s holds %s%s; upload_media accepts only %s", name, what, hint, accepted)
	}
	return typ, nil
}

// typeByExt returns the accepted type a name's extension suggests.
func typeByExt(name string) (mediaType, bool) {
	switch strings.ToLower(path.Ext(name)) {
	case ".png":
		return typePNG, true
	case ".jpg", ".jpeg":
		return typeJPEG, true
	case ".gif":
		return typeGIF, true
	case ".webp":
		return typeWebP, true
	case ".pdf":
		return typePDF, true
	}
	return mediaType{}, false
}

func isSVG(head []byte) bool {
	return bytes.Contains(bytes.ToLower(head), []byte("<svg"))
}

func isExecutable(head []byte) bool {
	for _, magic := range []string{
		"\x7fELF",                              // Linux, BSD
		"MZ",                                   // Windows
		"\xfe\xed\xfa\xce", "\xfe\xed\xfa\xcf", // Mach-O
		"\xce\xfa\xed\xfe", "\xcf\xfa\xed\xfe",
		"\xca\xfe\xba\xbe", // Mach-O universal, Java class
	} {
		if bytes.HasPrefix(head, []byte(magic)) {
			return true
		}
	}
	return false
}

// checkPDF checks that a PDF is not cut short: a PDF ends with %%EOF, which
// readers look for in its last 1024 bytes.
func checkPDF(b []byte) error {
	if !bytes.Contains(b[max(0, len(b)-1024):], []byte("%%EOF")) {
		return errors.New("has no %%EOF marker at its end: it is cut short or damaged")
	}
	return nil
}

// humanSize writes a byte count for the model: "812 bytes", "12.3 KiB",
// "3.75 MiB".
func humanSize(n int64) string {
	unit, div := "", int64(1)
	switch {
	case n >= 1<<20:
		unit, div = "MiB", 1<<20
	case n >= 1<<10:
		unit, div = "KiB", 1<<10
	default:
		return fmt.Sprintf("%d bytes", n)
	}
	s := strconv.FormatFloat(float64(n)/float64(div), 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + " " + unit
}
