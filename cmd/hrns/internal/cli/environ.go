package cli

import (
	"os"
	"strings"
)

// secretNames are the variables hrns reads keys from: the providers', hrns
// serve's, the vaults', and the exporters' headers (which carry tokens).
var secretNames = []string{
	"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
	keysEnv, vaultKeyEnv,
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
	"OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
}

// isSecretName reports whether the variable k holds a secret: one of
// secretNames, or a name that says so (…_API_KEY, …_KEY, …_TOKEN,
// …SECRET…, …PASSWORD…), such as a provider's api_key_env.
func isSecretName(k string) bool {
	u := strings.ToUpper(k)
	for _, s := range secretNames {
		if u == s {
			return true
		}
	}
	for _, part := range []string{"API_KEY", "SECRET", "PASSWORD", "PASSWD", "TOKEN", "CREDENTIAL"} {
		if strings.Contains(u, part) {
			return true
		}
	}
	return strings.HasSuffix(u, "_KEY") || strings.HasSuffix(u, "_KEYS")
}

// TakeEnvironment takes this process's environment for the hrns command
// and returns the function [IO.Getenv] reads it with. The secrets in it
// (API keys, tokens: see isSecretName) are then gone from the process's
// own environment, so that nothing hrns starts inherits them; the
// environment the kernel shows in /proc/PID/environ is blanked whole, so
// that no file read of it (an instruction file linked there, a command
// reading /proc/$PPID/environ) finds a key; and every descriptor hrns
// inherited beyond the standard three is marked close-on-exec, so that no
// program hrns starts inherits it. main calls it first.
func TakeEnvironment() func(string) string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := env[k]; !dup {
			env[k] = v
		}
	}
	for k := range env {
		if isSecretName(k) {
			os.Unsetenv(k)
		}
	}
	blankInitialEnvironment()
	closeInheritedOnExec()
	return func(k string) string { return env[k] }
}
