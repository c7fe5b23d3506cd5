// Package examples holds the recorded tour of hrns (tour.jsonl), embedded
// so that "hrns demo" plays it anywhere, without a key or a checkout.
package examples

import _ "embed"

// Tour is a recorded session (see package llm/replay): a model that lists
// and reads the files of a repository and describes it.
//
//go:embed tour.jsonl
var Tour []byte
