package cli

import (
	"errors"
	"regexp"
	"strings"
)

// agentFileKeys are the keys of an agent file's front matter.
const agentFileKeys = "name, description, model, provider, tools, max_turns"

// yamlKeyError says "unknown key" where the YAML decoder names a Go type
// ("field tool not found in type cli.agentFile").
func yamlKeyError(err error, known string) error {
	msg := err.Error()
	re := regexp.MustCompile(`field (\S+) not found in type \S+`)
	if !re.MatchString(msg) {
		return err
	}
	msg = re.ReplaceAllString(msg, `unknown key "$1" (the keys are `+known+`)`)
	return errors.New(strings.TrimPrefix(msg, "yaml: unmarshal errors:\n  "))
}
