package skills

import (
	"encoding/xml"
	"strings"
)

// PromptSection renders the names and descriptions of skills for a system
// prompt: a short explanation of skills and of load_skill, then one entry
// per skill in an <available_skills> block, in the order given (Discover
// sorts them by name). It returns "" when there are no skills, so that the
// caller can add it unconditionally.
func PromptSection(skills []*Skill) string {
	var b strings.Builder
	n := 0
	for _, s := range skills {
		if s == nil {
			continue
		}
		if n == 0 {
			b.WriteString("# Skills\n\n" +
				"Skills are folders of instructions for particular tasks. When a task matches the description " +
				"of a skill below, call load_skill with its name before you start, and follow the instructions " +
				"it returns; read_skill reads the other files of a skill when the instructions point to them.\n\n" +
				"<available_skills>\n")
		}
		n++
		b.WriteString("<skill>\n<name>")
		xml.EscapeText(&b, []byte(s.Name))
		b.WriteString("</name>\n<description>")
		xml.EscapeText(&b, []byte(oneLine(s.Description)))
		b.WriteString("</description>\n</skill>\n")
	}
	if n == 0 {
		return ""
	}
	b.WriteString("</available_skills>")
	return b.String()
}
