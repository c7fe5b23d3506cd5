package gemini

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/llm"
)

// modelList is one page of GET /v1beta/models.
type modelList struct {
	Models []struct {
		Name                       string   `json:"name"`
		SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	} `json:"models"`
	NextPageToken string `json:"nextPageToken"`
}

// maxModelPages bounds the pages ListModels follows.
const maxModelPages = 20

// ListModels returns the models the endpoint serves that generate content
// (those listing generateContent among their methods, or listing no
// methods), from GET {BaseURL}/v1beta/models, following its pages (at
// most 20), in the order the server lists them. IDs are given without the
// "models/" prefix, as Request.Model takes them.
func (c *Client) ListModels(ctx context.Context) ([]llm.ModelInfo, error) {
	out := []llm.ModelInfo{}
	token := ""
	for range maxModelPages {
		u := c.url("/models?pageSize=1000")
		if token != "" {
			u += "&pageToken=" + url.QueryEscape(token)
		}
		var page modelList
		if err := c.api().GetJSON(ctx, u, "model list", &page); err != nil {
			return nil, err
		}
		for _, m := range page.Models {
			if len(m.SupportedGenerationMethods) > 0 && !slices.Contains(m.SupportedGenerationMethods, "generateContent") {
				continue
			}
			out = append(out, llm.ModelInfo{ID: strings.TrimPrefix(m.Name, "models/"), OwnedBy: "google"})
		}
		if page.NextPageToken == "" || page.NextPageToken == token {
			break
		}
		token = page.NextPageToken
	}
	return out, nil
}
