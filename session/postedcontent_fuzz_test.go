package session

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// FuzzPostedContent feeds arbitrary results to the decoding of a posted
// tool_result (postedContent): it never panics; a refusal gives nothing
// else; a result without an image is the model's text as before; an
// accepted image reaches the model once, as a sound image of its media
// type within the bounds, logged without its bytes and carried by one
// observation.
func FuzzPostedContent(f *testing.F) {
	var b bytes.Buffer
	png.Encode(&b, image.NewGray(image.Rect(0, 0, 3, 2)))
	good := base64.StdEncoding.EncodeToString(b.Bytes())
	for _, seed := range []string{
		`{"text":"Clicked.","image":{"type":"base64","media_type":"image/png","source":"` + good + `"}}`,
		`{"text":"x","other":[1,2],"image":{"type":"base64","media_type":"image/png","source":"` + good + `"}}`,
		`{"image":{"type":"base64","media_type":"image/png","source":"` + good[:20] + `"}}`,
		`{"image":{"type":"base64","media_type":"image/webp","source":"UklGRhYAAABXRUJQVlA4TAoAAAAvAAAAAEX/I/of"}}`,
		`{"image":{"type":"base64","media_type":"image/gif","source":"R0lGODlhAQABAAAAACw="}}`,
		`{"image":null}`, `{"image":"x"}`, `{"image":{"type":"url"}}`, `"plain"`, `null`, ``, `[1]`, `{"text":"a"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, r []byte) {
		req := &ToolRequest{ID: "c1", ToolName: ComputerTool}
		content, logged, obs, msg := postedContent(json.RawMessage(r), req)
		if msg != "" {
			if content != nil || logged != nil || obs != nil {
				t.Fatalf("refused (%s) but gave content %v, logged %s, %d observations", msg, content, logged, len(obs))
			}
			return
		}
		var images []*llm.Media
		for _, p := range content {
			if p.Kind == llm.PartImage {
				images = append(images, p.Media)
			}
		}
		switch {
		case len(images) == 0:
			if len(obs) != 0 || len(content) != 1 || content[0].Kind != llm.PartText || content[0].Text != resultText(r) {
				t.Fatalf("no image, but content %v and %d observations", content, len(obs))
			}
		case len(images) == 1:
			m := images[0]
			if len(m.Data) > maxPostedImage || checkPostedImage(m.MIMEType, m.Data) != "" {
				t.Fatalf("accepted an unsound or oversized %s of %d bytes", m.MIMEType, len(m.Data))
			}
			if len(obs) != 1 || obs[0].Image == nil || obs[0].Image.MediaType != m.MIMEType {
				t.Fatalf("an image, but observations %+v", obs)
			}
			if bytes.Contains(logged, []byte(obs[0].Image.Source)) && len(obs[0].Image.Source) > 0 || !json.Valid(logged) {
				t.Fatalf("the log keeps the image or is not JSON: %s", logged)
			}
		default:
			t.Fatalf("%d images", len(images))
		}
	})
}
