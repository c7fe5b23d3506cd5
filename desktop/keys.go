package desktop

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// keyAliases maps the key names models write (xdotool's as Anthropic's
// computer tool uses them, OpenAI's upper-case ones, the browser's
// Playwright ones), lower-cased, to X keysym names.
var keyAliases = map[string]string{
	"ctrl": "ctrl", "control": "ctrl", "control_l": "Control_L", "control_r": "Control_R",
	"shift": "shift", "shift_l": "Shift_L", "shift_r": "Shift_R",
	"alt": "alt", "option": "alt", "alt_l": "Alt_L", "alt_r": "Alt_R",
	"super": "super", "meta": "super", "cmd": "super", "command": "super", "win": "super", "super_l": "Super_L", "super_r": "Super_R",
	"enter": "Return", "return": "Return", "kp_enter": "KP_Enter",
	"esc": "Escape", "escape": "Escape",
	"tab": "Tab", "space": "space", " ": "space",
	"backspace": "BackSpace", "delete": "Delete", "del": "Delete", "insert": "Insert",
	"home": "Home", "end": "End",
	"pageup": "Page_Up", "page_up": "Page_Up", "pgup": "Page_Up", "prior": "Prior",
	"pagedown": "Page_Down", "page_down": "Page_Down", "pgdn": "Page_Down", "next": "Next",
	"up": "Up", "down": "Down", "left": "Left", "right": "Right",
	"arrowup": "Up", "arrowdown": "Down", "arrowleft": "Left", "arrowright": "Right",
	"capslock": "Caps_Lock", "caps_lock": "Caps_Lock", "printscreen": "Print", "print": "Print",
	"menu": "Menu", "pause": "Pause",
	"plus": "plus", "minus": "minus",
}

// modifiers are the names xdotool takes as modifiers in a chord.
var modifiers = map[string]bool{"ctrl": true, "shift": true, "alt": true, "super": true}

const (
	maxKeyName  = 32 // the longest keysym name taken
	maxChord    = 6  // keys held together
	maxSequence = 16 // chords in one key action
)

// normalizeKey turns one key name into an X keysym name xdotool takes, or
// says why it cannot.
func normalizeKey(k string) (string, error) {
	if k == "" {
		return "", fmt.Errorf("an empty key name")
	}
	if a, ok := keyAliases[strings.ToLower(k)]; ok {
		return a, nil
	}
	if utf8.RuneCountInString(k) == 1 {
		r, _ := utf8.DecodeRuneInString(k)
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return "", fmt.Errorf("key %q is not a printable character", k)
		}
		if len(k) == 1 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return k, nil
		}
		// xdotool takes a character through its Unicode keysym.
		return fmt.Sprintf("U%04X", r), nil
	}
	if len(k) > maxKeyName {
		return "", fmt.Errorf("key name %.40q is too long", k)
	}
	if len(k) == 2 || len(k) == 3 {
		if (k[0] == 'f' || k[0] == 'F') && k[1] >= '1' && k[1] <= '9' {
			return "F" + k[1:], nil // F1..F35, validated below
		}
	}
	for i, r := range k {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' && i > 0
		if !ok {
			return "", fmt.Errorf("key name %q is not an X keysym name (letters, digits and _)", k)
		}
	}
	return k, nil
}

// parseChord parses keys held together, "ctrl+shift+t" (or, from OpenAI's
// arrays, the same names joined with +), into xdotool's form.
func parseChord(s string) (string, error) {
	parts := strings.Split(s, "+")
	if s == "+" {
		parts = []string{"plus"}
	} else if strings.HasSuffix(s, "++") { // ctrl++
		parts = append(strings.Split(strings.TrimSuffix(s, "++"), "+"), "plus")
	}
	if len(parts) > maxChord {
		return "", fmt.Errorf("chord %.60q holds more than %d keys", s, maxChord)
	}
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		k, err := normalizeKey(strings.TrimSpace(p))
		if err != nil {
			return "", err
		}
		out = append(out, k)
	}
	return strings.Join(out, "+"), nil
}

// parseKeys parses a key action's text: one chord or several separated by
// spaces ("ctrl+a Delete"), each in xdotool's syntax.
func parseKeys(s string) ([]string, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		if s != "" && strings.Trim(s, " ") == "" {
			return []string{"space"}, nil
		}
		return nil, fmt.Errorf("no key to press")
	}
	if len(fields) > maxSequence {
		return nil, fmt.Errorf("more than %d key chords in one action", maxSequence)
	}
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		c, err := parseChord(f)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// parseModifiers parses the keys held during a click ("shift", "ctrl+alt"):
// modifiers only.
func parseModifiers(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == ' ' }) {
		k, err := normalizeKey(f)
		if err != nil {
			return nil, err
		}
		if !modifiers[k] {
			return nil, fmt.Errorf("%q is not a modifier key (ctrl, shift, alt, super)", f)
		}
		out = append(out, k)
	}
	if len(out) > maxChord {
		return nil, fmt.Errorf("more than %d modifier keys", maxChord)
	}
	return out, nil
}
