package responses

import (
	"github.com/hrns-dev/hrns/internal/prefixcache"
	"github.com/hrns-dev/hrns/llm"
)

// toolsKey is the key of a conversation's [prefixcache.Tools] in its
// [llm.Conversation], so that a turn whose tools are the same (the loop
// sends the same tools every turn) neither renders them again (see
// [strictSchema], two thirds of a turn's allocations) nor encodes them.
// Besides the specs, the field depends on strictness ([Client.NoStrict])
// and on the model (which computer tool it takes): see [toolsExtra]. The
// tool choice is rendered at every request into its own field.
type toolsKey struct{}

// toolsFor returns the tools cache of conv.
func toolsFor(conv *llm.Conversation) *prefixcache.Tools {
	return prefixcache.ToolsOf(conv, toolsKey{})
}

// toolsExtra is what the "tools" field depends on besides the specs:
// strictness and the model.
func toolsExtra(strict bool, model string) string {
	if strict {
		return "strict " + model
	}
	return "loose " + model
}

// previewComputer reports whether specs rendered for model hold a
// computer_use_preview tool (see [renderTools]), whose models require
// truncation "auto".
func previewComputer(specs []llm.ToolSpec, model string) bool {
	if !ComputerUseModel(model) || ComputerToolModel(model) {
		return false
	}
	for i := range specs {
		if specs[i].Computer != nil {
			return true
		}
	}
	return false
}
