package prefixcache

import "unicode/utf8"

// AppendString appends s as a JSON string, byte for byte as encoding/json
// encodes it with HTML escaping off (json.Encoder.SetEscapeHTML(false)):
// `"` and `\` escaped, \b, \f, \n, \r and \t by name and the other control
// bytes as \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 as \u2028
// and \u2029, everything else as it is. FuzzAppendString holds it to
// encoding/json's.
//
// It exists because a tool result of tens of KiB is mostly text that needs
// no escape: AppendString skips eight such bytes at a time and copies them
// in runs straight onto dst, where encoding/json looks at each byte and
// encodes into a buffer of its own that is then copied.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			_ = s[i+7]
			x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if !needsEscape8(x) {
				i += 8
				continue
			}
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// needsEscape8 reports whether one of the eight bytes of x may need a look
// of its own: a control byte, `"`, `\` or a byte of a multi-byte UTF-8
// sequence. Each test is the classic "has a byte less than n" of words
// (exact as to whether there is one).
func needsEscape8(x uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	return (x|
		(x-ones*0x20)&^x|
		(quote-ones)&^quote|
		(backslash-ones)&^backslash)&highs != 0
}
