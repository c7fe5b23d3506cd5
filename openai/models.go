package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/hrns-dev/hrns/internal/sse"
	"github.com/hrns-dev/hrns/llm"
)

// modelList is the body of GET /models.
type modelList struct {
	Data []llm.ModelInfo `json:"data"`
}

// ListModels returns the models the endpoint serves, from GET
// {BaseURL}/models, in the order the server lists them.
func (c *Client) ListModels(ctx context.Context) ([]llm.ModelInfo, error) {
	resp, err := c.send(ctx, http.MethodGet, "/models", nil, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, sse.MaxLineSize))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("openai: reading model list: %w", err)
	}
	var list modelList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("openai: decoding model list: %w", err)
	}
	if list.Data == nil {
		list.Data = []llm.ModelInfo{}
	}
	return list.Data, nil
}
