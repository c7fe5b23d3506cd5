package responses

import (
	"context"

	"github.com/hrns-dev/hrns/llm"
)

// modelList is the body of GET /models.
type modelList struct {
	Data []llm.ModelInfo `json:"data"`
}

// ListModels returns the models the endpoint serves, from GET
// {BaseURL}/models, in the order the server lists them. OpenAI lists every
// model of the organisation there, including ones the Responses API does
// not serve (embeddings, audio).
func (c *Client) ListModels(ctx context.Context) ([]llm.ModelInfo, error) {
	var list modelList
	if err := c.api().GetJSON(ctx, c.url("/models"), "model list", &list); err != nil {
		return nil, err
	}
	if list.Data == nil {
		list.Data = []llm.ModelInfo{}
	}
	return list.Data, nil
}
