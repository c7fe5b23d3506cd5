package cli

import (
	"context"

	"github.com/hrns-dev/hrns/loop"
)

// loadSkills discovers skills and returns their tools and the text that
// introduces them in the system prompt; nil tools when there are none.
func loadSkills(o *runOptions, cfg *Config, stdio *IO) (*loop.Toolset, string, error) {
	return nil, "", nil
}

func skillsCommand(_ context.Context, args []string, stdio *IO) error {
	return usagef("skills: not built yet")
}
