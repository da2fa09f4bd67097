package jsonrpc

// The skippers below walk JSON that a parser of this package already
// accepted (a call's params.arguments, read lazily by policies and audit
// records): they find where a value ends and check nothing else. Malformed
// input ends them early (-1); they never read past the end.

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace[T ~string | ~[]byte](s T, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the index just past the string token starting at s[i]
// ('"'), -1 when it is unterminated.
func SkipString[T ~string | ~[]byte](s T, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// SkipValue returns the index just past the JSON value starting at s[i], -1
// when there is none. Containers are skipped by counting brackets outside
// strings, without recursion: nesting depth costs nothing.
func SkipValue[T ~string | ~[]byte](s T, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return SkipString(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				e := SkipString(s, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(s) && !endsScalar(s[j]) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// endsScalar reports whether c ends a number or literal: a delimiter or
// whitespace.
func endsScalar(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}
