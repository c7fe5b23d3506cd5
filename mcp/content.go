package mcp

import (
	"encoding/json"
	"fmt"
	"mime"
	"path"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// imageTypes are the image types that become image parts: the ones every
// provider hrns speaks to accepts. Other images become a line of text, so
// that one odd image does not make the provider refuse the whole request.
var imageTypes = map[string]bool{
	"image/png":  true,
	"image/jpeg": true,
	"image/gif":  true,
	"image/webp": true,
}

// fromResult maps an MCP tool result to what the model reads.
func fromResult(res *sdk.CallToolResult) *loop.Output {
	out := &loop.Output{IsError: res.IsError}
	for _, c := range res.Content {
		out.Content = append(out.Content, fromContent(c))
	}
	// Structured content is read only when there is no other content:
	// servers are to repeat it as text, and some wrap their content in it
	// (images included, as base64), which the model must not read twice.
	if len(out.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			out.Content = append(out.Content, llm.TextPart(string(b)))
		}
	}
	if len(out.Content) == 0 {
		out.Content = []llm.Part{llm.TextPart("")}
	}
	return out
}

// fromContent maps one content block to a part.
func fromContent(c sdk.Content) llm.Part {
	switch c := c.(type) {
	case *sdk.TextContent:
		return llm.TextPart(c.Text)
	case *sdk.ImageContent:
		return media(c.MIMEType, "", c.Data, "image")
	case *sdk.AudioContent:
		return llm.TextPart(fmt.Sprintf("[audio (%s, %d bytes) not shown: the model cannot hear it]", c.MIMEType, len(c.Data)))
	case *sdk.ResourceLink:
		return llm.TextPart(resourceLinkText(c))
	case *sdk.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return llm.TextPart("[empty resource]")
		}
		if r.Blob == nil {
			return llm.TextPart(r.Text)
		}
		return media(r.MIMEType, r.URI, r.Blob, "resource "+r.URI)
	case nil:
		return llm.TextPart("")
	}
	return llm.TextPart(fmt.Sprintf("[%T content not shown]", c))
}

// media maps binary content to an image or document part the providers
// take, to text when it is text, or else to a line saying what it was.
func media(mimeType, uri string, data []byte, what string) llm.Part {
	mt := baseType(mimeType)
	switch {
	case imageTypes[mt]:
		return llm.ImagePart(mt, data)
	case mt == "application/pdf":
		return llm.DocumentPart(mt, path.Base(uri), data)
	case isTextType(mt) && utf8.Valid(data):
		return llm.TextPart(string(data))
	}
	if mt == "" {
		mt = "unknown type"
	}
	return llm.TextPart(fmt.Sprintf("[%s (%s, %d bytes) not shown: binary content the model cannot read]", what, mt, len(data)))
}

func baseType(mimeType string) string {
	mt, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		mt, _, _ = strings.Cut(mimeType, ";")
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// isTextType reports whether mt is read as text.
func isTextType(mt string) bool {
	if strings.HasPrefix(mt, "text/") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml",
		"application/javascript", "application/toml", "image/svg+xml":
		return true
	}
	return strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml")
}

func resourceLinkText(c *sdk.ResourceLink) string {
	var b strings.Builder
	b.WriteString("[resource link: ")
	if c.Name != "" {
		b.WriteString(c.Name)
		b.WriteString(" ")
	}
	b.WriteString("<" + c.URI + ">")
	if c.MIMEType != "" {
		b.WriteString(" (" + c.MIMEType + ")")
	}
	if c.Description != "" {
		b.WriteString(": " + c.Description)
	}
	b.WriteString("]")
	return b.String()
}

// toResult maps a tool's output to an MCP tool result.
func toResult(out *loop.Output) *sdk.CallToolResult {
	res := &sdk.CallToolResult{Content: []sdk.Content{}}
	if out == nil {
		return res
	}
	res.IsError = out.IsError
	for _, p := range out.Content {
		if c := toContent(p); c != nil {
			res.Content = append(res.Content, c)
		}
	}
	return res
}

// toContent maps one part of a tool's output to an MCP content block; nil
// for parts that carry nothing for a client.
func toContent(p llm.Part) sdk.Content {
	switch p.Kind {
	case llm.PartText:
		return &sdk.TextContent{Text: p.Text}
	case llm.PartImage, llm.PartDocument:
		m := p.Media
		if m == nil {
			return nil
		}
		if len(m.Data) == 0 {
			return &sdk.ResourceLink{URI: m.URL, Name: firstNonEmpty(m.Name, path.Base(m.URL)), MIMEType: m.MIMEType}
		}
		if p.Kind == llm.PartImage {
			return &sdk.ImageContent{MIMEType: m.MIMEType, Data: m.Data}
		}
		uri := "hrns:document"
		if m.Name != "" {
			uri += "/" + m.Name
		}
		return &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: uri, MIMEType: m.MIMEType, Blob: m.Data}}
	case llm.PartReasoning, llm.PartToolCall, llm.PartToolResult:
		return nil
	}
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
