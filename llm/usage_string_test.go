package llm_test

import (
	"fmt"

	"github.com/hrns-dev/hrns/llm"
)

func ExampleUsage_String() {
	fmt.Println(llm.Usage{InputTokens: 1200, CacheReadTokens: 800, OutputTokens: 56})
	fmt.Println(llm.Usage{})
	// Output:
	// 1200 input (800 cached) + 56 output tokens
	// 0 input + 0 output tokens
}
