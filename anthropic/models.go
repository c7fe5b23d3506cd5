package anthropic

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// modelsPageSize is the page size asked of GET /v1/models, the API's
// maximum.
const modelsPageSize = 1000

// maxModelPages bounds the pages ListModels follows, against a server that
// always says there are more.
const maxModelPages = 100

// modelList is one page of GET /v1/models.
type modelList struct {
	Data []struct {
		ID        string `json:"id"`
		CreatedAt string `json:"created_at"`
	} `json:"data"`
	HasMore bool   `json:"has_more"`
	LastID  string `json:"last_id"`
}

// ListModels returns the models the API serves, from GET {BaseURL}/v1/models,
// most recent first as the API lists them. It follows the pages of the list.
// Created is the model's release time in Unix seconds; OwnedBy is empty.
func (c *Client) ListModels(ctx context.Context) ([]llm.ModelInfo, error) {
	models := []llm.ModelInfo{}
	afterID := ""
	for range maxModelPages {
		q := url.Values{"limit": {fmt.Sprint(modelsPageSize)}}
		if afterID != "" {
			q.Set("after_id", afterID)
		}
		list, err := c.modelsPage(ctx, "/v1/models?"+q.Encode())
		if err != nil {
			return nil, err
		}
		for _, m := range list.Data {
			info := llm.ModelInfo{ID: m.ID}
			if t, err := time.Parse(time.RFC3339, m.CreatedAt); err == nil {
				info.Created = t.Unix()
			}
			models = append(models, info)
		}
		if !list.HasMore || list.LastID == "" || list.LastID == afterID {
			break
		}
		afterID = list.LastID
	}
	return models, nil
}

// modelsPage fetches and decodes one page of the model list.
func (c *Client) modelsPage(ctx context.Context, path string) (*modelList, error) {
	var list modelList
	if err := c.api("").GetJSON(ctx, c.url(path), "model list", &list); err != nil {
		return nil, err
	}
	return &list, nil
}
