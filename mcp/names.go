package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"runtime/debug"
	"strings"
)

// maxToolName is the longest tool name the loop and the providers take.
const maxToolName = 64

// toolName returns the name a server's tool is mounted under: prefix and
// name, with every character other than letters, digits, '_' and '-'
// replaced by '_', and a name too long cut short and made unique again by
// a hash of the full name.
func toolName(prefix, name string) string {
	full := prefix + name
	var b strings.Builder
	for _, r := range full {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) <= maxToolName {
		return s
	}
	sum := sha256.Sum256([]byte(full))
	h := hex.EncodeToString(sum[:4])
	return s[:maxToolName-len(h)-1] + "_" + h
}

// version returns the version of the hrns module, for the implementation
// info sent to peers.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
