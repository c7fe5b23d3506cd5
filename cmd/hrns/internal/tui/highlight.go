package tui

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// A small syntax highlighter for the code blocks of answers: keywords,
// string literals, comments and numbers of the languages models write most,
// by a scanner that knows each language's comment and string syntax and
// its keywords, no more. It is not a lexer (it does not know that `"` in a
// Rust lifetime or a shell heredoc is not a quote) and it does not need to
// be: a wrong colour is all a mistake costs, and a code block's text is
// shown unchanged whatever the colours.

// langDef is what the scanner knows of a language.
type langDef struct {
	keywords     map[string]bool
	lineComments []string // "//", "#", "--"
	blockComment [2]string
	quotes       string // the characters that open and close a string
	multiline    string // those of quotes whose strings may span lines
}

// languages maps a code block's info string (lower case) to its language,
// built at first use.
var languages = sync.OnceValue(func() map[string]*langDef {
	kw := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, w := range strings.Fields(s) {
			m[w] = true
		}
		return m
	}
	cLike := " break case continue default do else for goto if return switch while struct enum union typedef sizeof static const void int char long short float double unsigned signed extern volatile inline true false NULL nullptr"
	goLang := &langDef{
		keywords:     kw("break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false iota any error string int int64 int32 uint uint64 uint8 byte rune bool float64 float32 make new len cap append panic recover"),
		lineComments: []string{"//"}, blockComment: [2]string{"/*", "*/"}, quotes: "\"'`", multiline: "`",
	}
	c := &langDef{keywords: kw(cLike + " class public private protected virtual template typename namespace using new delete this throw try catch auto bool include define"),
		lineComments: []string{"//"}, blockComment: [2]string{"/*", "*/"}, quotes: "\"'"}
	java := &langDef{keywords: kw(cLike + " class interface extends implements public private protected abstract final new this super throw throws try catch finally import package boolean var val fun let func override String null where when is in as object data sealed open internal suspend"),
		lineComments: []string{"//"}, blockComment: [2]string{"/*", "*/"}, quotes: "\"'"}
	js := &langDef{keywords: kw("break case catch class const continue debugger default delete do else export extends finally for function if import in instanceof let new return super switch this throw try typeof var void while with yield async await of null undefined true false interface type enum implements private public protected readonly as from static get set declare namespace"),
		lineComments: []string{"//"}, blockComment: [2]string{"/*", "*/"}, quotes: "\"'`", multiline: "`"}
	py := &langDef{keywords: kw("False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield self match case print"),
		lineComments: []string{"#"}, quotes: "\"'"}
	rust := &langDef{keywords: kw("as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while Some None Ok Err String Vec Option Result i32 i64 u8 u32 u64 usize f64 bool str"),
		lineComments: []string{"//"}, blockComment: [2]string{"/*", "*/"}, quotes: "\""}
	sh := &langDef{keywords: kw("if then else elif fi case esac for while until do done in function return exit export local readonly set unset echo cd sudo"),
		lineComments: []string{"#"}, quotes: "\"'", multiline: "\"'"}
	sql := &langDef{keywords: kw("select from where insert into values update set delete create table index view drop alter add column primary key foreign references not null unique default and or in is like between join left right inner outer on group by order having limit offset as distinct union all case when then else end begin commit rollback returning with SELECT FROM WHERE INSERT INTO VALUES UPDATE SET DELETE CREATE TABLE INDEX DROP ALTER PRIMARY KEY NOT NULL AND OR IN IS JOIN LEFT ON GROUP BY ORDER LIMIT AS UNION ALL CASE WHEN THEN ELSE END RETURNING WITH"),
		lineComments: []string{"--"}, blockComment: [2]string{"/*", "*/"}, quotes: "'\""}
	ruby := &langDef{keywords: kw("alias and begin break case class def defined do else elsif end ensure false for if in module next nil not or redo rescue retry return self super then true undef unless until when while yield require puts attr_accessor"),
		lineComments: []string{"#"}, quotes: "\"'"}
	data := &langDef{keywords: kw("true false null yes no on off"), lineComments: []string{"#"}, quotes: "\"'"}
	json := &langDef{keywords: kw("true false null"), quotes: "\""}
	m := map[string]*langDef{
		"go": goLang, "golang": goLang,
		"c": c, "h": c, "cpp": c, "c++": c, "cc": c, "hpp": c, "objc": c,
		"java": java, "kotlin": java, "kt": java, "scala": java, "swift": java, "cs": java, "csharp": java, "c#": java, "dart": java,
		"js": js, "javascript": js, "jsx": js, "ts": js, "typescript": js, "tsx": js, "mjs": js,
		"py": py, "python": py, "python3": py,
		"rust": rust, "rs": rust,
		"sh": sh, "bash": sh, "shell": sh, "zsh": sh, "console": sh, "shellsession": sh,
		"sql": sql, "postgresql": sql, "psql": sql, "sqlite": sql, "mysql": sql,
		"rb": ruby, "ruby": ruby,
		"yaml": data, "yml": data, "toml": data, "ini": data, "dockerfile": data,
		"json": json, "jsonc": json, "json5": json,
	}
	return m
})

// highlight splits code into lines of spans coloured for lang (the first
// word of a fenced block's info string); an unknown language is shown in
// the code colour only.
func highlight(lang, code string, th *mdTheme) []mdLine {
	lang = strings.ToLower(strings.TrimSpace(lang))
	if i := strings.IndexAny(lang, " {,"); i >= 0 {
		lang = lang[:i]
	}
	def := languages()[lang]
	var tokens []span
	if def == nil {
		tokens = []span{{code, ""}}
	} else {
		tokens = scanCode(def, code, th)
	}
	var lines []mdLine
	var cur mdLine
	for _, t := range tokens {
		for {
			i := strings.IndexByte(t.text, '\n')
			if i < 0 {
				break
			}
			if i > 0 {
				cur = append(cur, span{expandTabs(t.text[:i]), t.style})
			}
			lines = append(lines, cur)
			cur = nil
			t.text = t.text[i+1:]
		}
		if t.text != "" {
			cur = append(cur, span{expandTabs(t.text), t.style})
		}
	}
	return append(lines, cur)
}

// scanCode cuts code into plain text, keywords, strings, comments and
// numbers.
func scanCode(def *langDef, code string, th *mdTheme) []span {
	var out []span
	plain := 0 // start of the plain text not yet emitted
	emit := func(start, end int, style string) {
		if plain < start {
			out = append(out, span{code[plain:start], ""})
		}
		out = append(out, span{code[start:end], style})
		plain = end
	}
	isIdent := func(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
	prevIdent := false
	for i := 0; i < len(code); {
		rest := code[i:]
		if def.blockComment[0] != "" && strings.HasPrefix(rest, def.blockComment[0]) {
			end := strings.Index(rest[len(def.blockComment[0]):], def.blockComment[1])
			n := len(rest)
			if end >= 0 {
				n = len(def.blockComment[0]) + end + len(def.blockComment[1])
			}
			emit(i, i+n, th.com)
			i, prevIdent = i+n, false
			continue
		}
		comment := false
		for _, lc := range def.lineComments {
			// "#" starts a comment only at a word's start ("a#b" is a word
			// in a shell).
			if strings.HasPrefix(rest, lc) && !(lc == "#" && prevIdent) {
				comment = true
				break
			}
		}
		if comment {
			n := strings.IndexByte(rest, '\n')
			if n < 0 {
				n = len(rest)
			}
			emit(i, i+n, th.com)
			i, prevIdent = i+n, false
			continue
		}
		r, size := utf8.DecodeRuneInString(rest)
		switch {
		case r < utf8.RuneSelf && strings.IndexByte(def.quotes, byte(r)) >= 0:
			multi := strings.IndexByte(def.multiline, byte(r)) >= 0
			n := 1
			for n < len(rest) {
				c := rest[n]
				if c == '\\' && r != '`' {
					n += 2
					continue
				}
				n++
				if c == byte(r) || c == '\n' && !multi {
					break
				}
			}
			n = min(n, len(rest))
			emit(i, i+n, th.str)
			i, prevIdent = i+n, false
		case unicode.IsDigit(r) && !prevIdent:
			n := 0 // 0x1F, 1_000, 2.5e10, and digits outside ASCII
			for n < len(rest) {
				r2, s2 := utf8.DecodeRuneInString(rest[n:])
				if r2 != '.' && !isIdent(r2) {
					break
				}
				n += s2
			}
			emit(i, i+n, th.num)
			i, prevIdent = i+n, true
		case isIdent(r):
			n := 0
			for n < len(rest) {
				r2, s2 := utf8.DecodeRuneInString(rest[n:])
				if !isIdent(r2) {
					break
				}
				n += s2
			}
			if !prevIdent && def.keywords[rest[:n]] {
				emit(i, i+n, th.kw)
			}
			i, prevIdent = i+n, true
		default:
			i, prevIdent = i+size, false
		}
	}
	if plain < len(code) {
		out = append(out, span{code[plain:], ""})
	}
	return out
}
