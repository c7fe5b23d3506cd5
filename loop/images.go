package loop

import "github.com/hrns-dev/hrns/llm"

// Part of step 3 of a turn (see run.runTurns): the images a request
// carries. An agent that sees its screen (the browser's screenshots, the
// desktop's computer tool) adds an image at every step; providers refuse a
// request with too many (Anthropic takes at most 100), and each costs
// input tokens at every later turn. The request carries the most recent
// Options.KeepImages; older ones are replaced by a text part saying so.
// The transcript keeps them all: only what is sent is thinned.
//
// Images are left out in batches (down to three quarters of the limit),
// so that the messages sent stay the same from one turn to the next for
// many turns: the provider's prompt cache and the encoded prefix the
// conversation keeps (llm.Conversation) are reused in between.

// defaultKeepImages is Options.KeepImages' default: under Anthropic's 100
// images per request, with room for a turn's own.
const defaultKeepImages = 50

// imageLeftOut replaces an image left out of a request.
const imageLeftOut = "[an earlier image was left out of this request: only the most recent images are sent]"

// imageWindow is what the run knows of its transcript's images.
type imageWindow struct {
	// scanned is the number of transcript messages counted in total.
	scanned int
	total   int
	// dropped is the number of oldest images left out of requests;
	// prefix is transcript[:len(prefix)] with those images replaced.
	dropped int
	prefix  []llm.Message
}

// reset forgets what was counted: the transcript was rewritten.
func (w *imageWindow) reset() { *w = imageWindow{} }

// requestMessages returns the transcript as the turn's request carries
// it: itself while it holds at most keep images, else with its oldest
// images replaced.
func (r *run) requestMessages() []llm.Message {
	keep := r.agent.opts.KeepImages
	if keep == 0 {
		keep = defaultKeepImages
	}
	if keep < 0 {
		return r.transcript
	}
	w := &r.images
	if w.scanned > len(r.transcript) {
		w.reset()
	}
	for _, m := range r.transcript[w.scanned:] {
		w.total += countImages(m.Parts)
	}
	w.scanned = len(r.transcript)
	if w.total-w.dropped > keep {
		w.dropped = w.total - max(keep-keep/4, 1)
		w.prefix = dropImages(r.transcript, w.dropped)
		r.conversation.Rewrote() // earlier messages changed
	}
	if w.dropped == 0 {
		return r.transcript
	}
	out := make([]llm.Message, 0, len(r.transcript))
	out = append(out, w.prefix...)
	return append(out, r.transcript[len(w.prefix):]...)
}

// countImages counts the images in parts, tool results' included.
func countImages(parts []llm.Part) int {
	n := 0
	for _, p := range parts {
		switch {
		case p.Kind == llm.PartImage:
			n++
		case p.Kind == llm.PartToolResult && p.ToolResult != nil:
			n += countImages(p.ToolResult.Content)
		}
	}
	return n
}

// dropImages returns the shortest prefix of msgs that holds its first n
// images, with those images replaced by text. Messages are values: the
// changed ones are copies, msgs is not modified.
func dropImages(msgs []llm.Message, n int) []llm.Message {
	var out []llm.Message
	for _, m := range msgs {
		if n == 0 {
			break
		}
		if countImages(m.Parts) > 0 {
			m.Parts, n = dropParts(m.Parts, n)
		}
		out = append(out, m)
	}
	return out
}

// dropParts returns parts with up to n images replaced, as a copy, and
// how many of n are left to replace.
func dropParts(parts []llm.Part, n int) ([]llm.Part, int) {
	out := make([]llm.Part, len(parts))
	copy(out, parts)
	for i, p := range out {
		if n == 0 {
			break
		}
		switch {
		case p.Kind == llm.PartImage:
			out[i] = llm.TextPart(imageLeftOut)
			n--
		case p.Kind == llm.PartToolResult && p.ToolResult != nil && countImages(p.ToolResult.Content) > 0:
			tr := *p.ToolResult
			tr.Content, n = dropParts(tr.Content, n)
			out[i].ToolResult = &tr
		}
	}
	return out, n
}
