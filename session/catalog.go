package session

// webSurferInstructions are the instructions of the agents of [HCatalog].
const webSurferInstructions = `You work on the web to do the task you are given: open pages, read them, search, follow links, and, with a browser, click, type and fill in forms as a person would.
Plan briefly, then act; check on the page that each step did what you meant. When a page does not load or an element is missing, try another way before giving up.
Do not buy, send, publish or delete anything, nor sign in, unless the task asks for it. When you are done, answer with what you found or did, and say plainly what you could not do.`

// hAgentNames are the names H Company publishes for its agents, as its
// SDK and documentation use them: each is a web agent (an agent with its
// own browser). They differ at H by the model behind them; here they run
// the server's model unless the operator maps them to an agent of its own.
var hAgentNames = map[string]string{
	"h/web":                    "H's web agent",
	"h/web-surfer-flash":       "H's fast web agent",
	"h/web-surfer-pro":         "H's most capable web agent",
	"h/web-surfer-holo3-1-35b": "H's web agent on Holo3.1 35B",
}

// HCatalog returns hrns's agents for the names H Company publishes for
// its agents ("h/web-surfer-pro", "h/web-surfer-flash",
// "h/web-surfer-holo3-1-35b", and the older "h/web"), so that clients of
// H's Agents API that name them work unchanged. Each is a web surfer: the
// environment kind "web" (its browser where the server gives sessions
// one, web_fetch otherwise) and the server's default model
// ([Options.DefaultModel]). The map is the caller's: add it to
// [Options.Agents], leaving out or replacing the names an operator maps
// elsewhere. A server without a "web" environment refuses sessions of
// these agents (422 naming the missing toolset).
func HCatalog() map[string]*AgentConfig {
	out := make(map[string]*AgentConfig, len(hAgentNames))
	for name, what := range hAgentNames {
		out[name] = &AgentConfig{
			Description:  "Browses the web to do a task and answers with what it found: hrns's stand-in for " + what + " (" + name + "), on this server's model.",
			Instructions: webSurferInstructions,
			Toolsets:     []string{envWeb},
		}
	}
	return out
}
