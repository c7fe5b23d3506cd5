package desktop

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The actions of the computer tool. Their names and arguments are those of
// Anthropic's computer tool (computer_20250124), which models are trained
// on; the responses package translates OpenAI's computer-use actions into
// them.
const (
	ActScreenshot     = "screenshot"
	ActCursorPosition = "cursor_position"
	ActMouseMove      = "mouse_move"
	ActLeftClick      = "left_click"
	ActRightClick     = "right_click"
	ActMiddleClick    = "middle_click"
	ActDoubleClick    = "double_click"
	ActTripleClick    = "triple_click"
	ActLeftMouseDown  = "left_mouse_down"
	ActLeftMouseUp    = "left_mouse_up"
	ActLeftClickDrag  = "left_click_drag"
	ActScroll         = "scroll"
	ActType           = "type"
	ActKey            = "key"
	ActHoldKey        = "hold_key"
	ActWait           = "wait"
	// ActBatch does Actions in turn, with one screenshot after the last:
	// a provider's call that carries several actions (OpenAI's
	// computer_call with actions) is one call of the tool.
	ActBatch = "batch"
)

// Actions lists every action, in the order the tool's schema gives them.
var Actions = []string{
	ActScreenshot, ActCursorPosition, ActMouseMove, ActLeftClick, ActRightClick, ActMiddleClick,
	ActDoubleClick, ActTripleClick, ActLeftMouseDown, ActLeftMouseUp, ActLeftClickDrag,
	ActScroll, ActType, ActKey, ActHoldKey, ActWait, ActBatch,
}

// An Action is one call of the computer tool: its arguments as the model
// wrote them. Coordinates are in the model's view of the screen
// ([Desktop.View]), not the screen's own pixels.
type Action struct {
	// Action is one of [Actions].
	Action string `json:"action"`
	// Coordinate is where to move, click, scroll or end a drag: [x, y].
	Coordinate []float64 `json:"coordinate,omitempty"`
	// StartCoordinate is where a drag starts (left_click_drag); without
	// it the drag starts where the pointer is.
	StartCoordinate []float64 `json:"start_coordinate,omitempty"`
	// Path is a drag along more points than two (OpenAI's drag): the
	// pointer goes through each in turn, the button held.
	Path [][]float64 `json:"path,omitempty"`
	// Text is what to type (type), the keys to press (key, hold_key: an
	// xdotool-style chord such as "ctrl+s" or "Return", several separated
	// by spaces), or the modifier keys held during a click or scroll
	// ("shift").
	Text string `json:"text,omitempty"`
	// ScrollDirection is up, down, left or right; ScrollAmount the number
	// of wheel clicks (1 to 30).
	ScrollDirection string `json:"scroll_direction,omitempty"`
	ScrollAmount    int    `json:"scroll_amount,omitempty"`
	// Duration is how long to wait or hold a key, in seconds.
	Duration float64 `json:"duration,omitempty"`
	// SafetyChecks are a provider's checks on this action (OpenAI's
	// pending safety checks) that a person must acknowledge before it
	// runs: the tool sends such a call to the approver whatever else
	// would allow it ([loop.ToolDef.AskPerson]).
	SafetyChecks []SafetyCheck `json:"safety_checks,omitempty"`
	// Actions are the actions of a batch (ActBatch), done in turn: at
	// most [MaxBatch], none a batch, with at most [MaxText] characters
	// typed and [MaxWait] seconds waited or held in all. A batch stops at
	// its first action that fails.
	Actions []Action `json:"actions,omitempty"`
}

// A SafetyCheck is a provider's warning about an action.
type SafetyCheck struct {
	ID      string `json:"id"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Limits of one action.
const (
	// MaxText is the longest text one type action types, in characters.
	MaxText = 4000
	// MaxWait is the longest wait or key hold, in seconds.
	MaxWait = 30
	// MaxScroll is the most wheel clicks of one scroll.
	MaxScroll = 30
	// MaxPath is the most points of a drag's path.
	MaxPath = 64
	// MaxBatch is the most actions of one batch.
	MaxBatch = 16
)

// schema is the JSON Schema of the computer tool's arguments, rendered for
// providers without a native computer tool.
const schema = `{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["screenshot", "cursor_position", "mouse_move", "left_click", "right_click", "middle_click", "double_click", "triple_click", "left_mouse_down", "left_mouse_up", "left_click_drag", "scroll", "type", "key", "hold_key", "wait", "batch"],
      "description": "What to do. screenshot: see the screen. mouse_move, left_click, right_click, middle_click, double_click, triple_click: at coordinate (clicks without one act where the pointer is). left_click_drag: press at start_coordinate (or where the pointer is), move through path if given, release at coordinate. left_mouse_down, left_mouse_up: press or release the left button. scroll: scroll_amount wheel clicks in scroll_direction at coordinate. type: type text. key: press keys (xdotool names, a chord such as ctrl+s, several separated by spaces). hold_key: hold text's keys for duration seconds. wait: wait duration seconds. cursor_position: where the pointer is. batch: do actions in turn. Every action but cursor_position returns a fresh screenshot (a batch, one after its last action)."},
    "coordinate": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2, "description": "[x, y] in pixels of the screenshot."},
    "start_coordinate": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2, "description": "[x, y] where a left_click_drag starts."},
    "path": {"type": "array", "items": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}, "maxItems": 64, "description": "Points a left_click_drag passes through between start and end."},
    "text": {"type": "string", "description": "The text to type, the keys to press or hold, or the modifier keys held during a click (shift, ctrl, alt, super)."},
    "scroll_direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
    "scroll_amount": {"type": "integer", "minimum": 1, "maximum": 30, "description": "Wheel clicks to scroll."},
    "duration": {"type": "number", "minimum": 0, "maximum": 30, "description": "Seconds to wait or to hold keys."},
    "safety_checks": {"type": "array", "maxItems": 8, "items": {"type": "object", "properties": {"id": {"type": "string", "maxLength": 200}, "code": {"type": "string", "maxLength": 200}, "message": {"type": "string", "maxLength": 2000}}, "required": ["id"], "additionalProperties": false},
      "description": "Leave out: set by the provider for a person to acknowledge."},
    "actions": {"type": "array", "minItems": 1, "maxItems": 16, "items": {"type": "object"}, "description": "For batch: up to 16 actions, each an object of these arguments (action, coordinate, text...), done in turn."}
  },
  "required": ["action"],
  "additionalProperties": false
}`

// ParseAction decodes and checks a call's arguments against a view of
// w×h pixels: the action is known, the coordinates it needs are there and
// within the view, the text is bounded and the keys are names of keys.
func ParseAction(args []byte, w, h int) (*Action, error) {
	var a Action
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("the arguments are not a computer action: %v", err)
	}
	if err := a.check(w, h); err != nil {
		return nil, err
	}
	return &a, nil
}

func (a *Action) check(w, h int) error {
	point := func(name string, p []float64, required bool) error {
		if p == nil {
			if required {
				return fmt.Errorf("%s needs %s [x, y]", a.Action, name)
			}
			return nil
		}
		if len(p) != 2 {
			return fmt.Errorf("%s must be [x, y], not %d numbers", name, len(p))
		}
		for _, v := range p {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s is not a number", name)
			}
		}
		if p[0] < 0 || p[1] < 0 || p[0] >= float64(w) || p[1] >= float64(h) {
			return fmt.Errorf("%s [%g, %g] is outside the screen, which is %dx%d: x from 0 to %d, y from 0 to %d",
				name, p[0], p[1], w, h, w-1, h-1)
		}
		return nil
	}
	noText := func() error {
		if a.Text != "" {
			return fmt.Errorf("%s takes no text", a.Action)
		}
		return nil
	}
	if len(a.Path) > MaxPath {
		return fmt.Errorf("a path of more than %d points", MaxPath)
	}
	if a.Path != nil && a.Action != ActLeftClickDrag {
		return fmt.Errorf("%s takes no path", a.Action)
	}
	if a.Duration < 0 || a.Duration > MaxWait || math.IsNaN(a.Duration) {
		return fmt.Errorf("duration must be from 0 to %d seconds", MaxWait)
	}
	if a.Actions != nil && a.Action != ActBatch {
		return fmt.Errorf("%s takes no actions (only batch does)", a.Action)
	}
	switch a.Action {
	case ActScreenshot, ActCursorPosition:
		return noText()
	case ActMouseMove:
		if _, err := parseModifiers(a.Text); err != nil {
			return err
		}
		return point("coordinate", a.Coordinate, true)
	case ActLeftClick, ActRightClick, ActMiddleClick, ActDoubleClick, ActTripleClick, ActLeftMouseDown, ActLeftMouseUp:
		if _, err := parseModifiers(a.Text); err != nil {
			return err
		}
		return point("coordinate", a.Coordinate, false)
	case ActLeftClickDrag:
		if _, err := parseModifiers(a.Text); err != nil {
			return err
		}
		if err := point("start_coordinate", a.StartCoordinate, false); err != nil {
			return err
		}
		for i, p := range a.Path {
			if err := point(fmt.Sprintf("path[%d]", i), p, true); err != nil {
				return err
			}
		}
		return point("coordinate", a.Coordinate, true)
	case ActScroll:
		switch a.ScrollDirection {
		case "up", "down", "left", "right":
		default:
			return fmt.Errorf("scroll_direction must be up, down, left or right, not %.20q", a.ScrollDirection)
		}
		if a.ScrollAmount < 1 || a.ScrollAmount > MaxScroll {
			return fmt.Errorf("scroll_amount must be from 1 to %d", MaxScroll)
		}
		if _, err := parseModifiers(a.Text); err != nil {
			return err
		}
		return point("coordinate", a.Coordinate, false)
	case ActType:
		return checkText(a.Text)
	case ActKey, ActHoldKey:
		_, err := parseKeys(a.Text)
		return err
	case ActWait:
		return noText()
	case ActBatch:
		return a.checkBatch(w, h)
	case "":
		return fmt.Errorf("no action: one of %s", strings.Join(Actions, ", "))
	}
	return fmt.Errorf("unknown action %.30q: one of %s", a.Action, strings.Join(Actions, ", "))
}

// checkBatch checks a batch: its own arguments are its actions (and the
// provider's safety checks), each action is checked as one, and together
// they type at most MaxText characters and wait at most MaxWait seconds.
func (a *Action) checkBatch(w, h int) error {
	if a.Text != "" || a.Coordinate != nil || a.StartCoordinate != nil || a.ScrollDirection != "" || a.ScrollAmount != 0 || a.Duration != 0 {
		return fmt.Errorf("batch takes only actions")
	}
	if len(a.Actions) == 0 {
		return fmt.Errorf("batch needs actions")
	}
	if len(a.Actions) > MaxBatch {
		return fmt.Errorf("a batch of %d actions; at most %d are done in one call", len(a.Actions), MaxBatch)
	}
	chars, wait := 0, 0.0
	for i := range a.Actions {
		s := &a.Actions[i]
		if s.Action == ActBatch || s.SafetyChecks != nil {
			return fmt.Errorf("actions[%d]: a batch holds single actions, without safety checks", i)
		}
		if err := s.check(w, h); err != nil {
			return fmt.Errorf("actions[%d]: %w", i, err)
		}
		if s.Action == ActType {
			chars += utf8.RuneCountInString(s.Text)
		}
		wait += s.Duration
	}
	if chars > MaxText {
		return fmt.Errorf("the batch types %d characters; at most %d are typed in one call", chars, MaxText)
	}
	if wait > MaxWait {
		return fmt.Errorf("the batch waits or holds keys for %gs; at most %d in one call", wait, MaxWait)
	}
	return nil
}

// checkText checks the text of a type action: valid UTF-8, at most
// [MaxText] characters, no control characters but newline and tab.
func checkText(s string) error {
	if s == "" {
		return fmt.Errorf("type needs text")
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("the text is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > MaxText {
		return fmt.Errorf("the text is %d characters long; at most %d are typed at once", n, MaxText)
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || r == 0x7f) {
			return fmt.Errorf("the text holds the control character %U: press keys with the key action", r)
		}
	}
	return nil
}
