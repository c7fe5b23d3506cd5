package cli

import (
	"context"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/responses"
)

// endpointOf names a provider's client by its kind and base URL: a chat
// resumed on the same endpoint keeps the model it was switched to. It is
// "" for models that are not a provider's client (a replay).
func endpointOf(m llm.Model) string {
	switch c := m.(type) {
	case *openai.Client:
		return "openai " + firstString(c.BaseURL, openai.DefaultBaseURL)
	case *responses.Client:
		return "openai-responses " + firstString(c.BaseURL, responses.DefaultBaseURL)
	case *anthropic.Client:
		return "anthropic " + firstString(c.BaseURL, anthropic.DefaultBaseURL)
	case *gemini.Client:
		return "gemini " + firstString(c.BaseURL, gemini.DefaultBaseURL)
	}
	return ""
}

// modelLister returns the chat's /model listing of m's provider (its
// models endpoint), or nil when it has none.
func modelLister(m llm.Model) func(context.Context) ([]string, error) {
	l, ok := m.(llm.ModelLister)
	if !ok {
		return nil
	}
	return func(ctx context.Context) ([]string, error) {
		infos, err := l.ListModels(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(infos))
		for _, in := range infos {
			out = append(out, in.ID)
		}
		return out, nil
	}
}

// knownModels are the models of the price table that m's provider serves,
// sorted: what /model offers when the provider cannot list its own.
func knownModels(m llm.Model, prices pricing.Table) []string {
	kind, _, _ := strings.Cut(endpointOf(m), " ")
	var out []string
	for name := range prices {
		claude, gem := strings.HasPrefix(name, "claude"), strings.HasPrefix(name, "gemini")
		switch kind {
		case "anthropic":
			if !claude {
				continue
			}
		case "gemini":
			if !gem {
				continue
			}
		case "openai", "openai-responses":
			if claude || gem {
				continue
			}
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
