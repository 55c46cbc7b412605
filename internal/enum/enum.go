// Package enum names the values of small integer option types (a resize mode, a decoder choice,
// an error policy) from a table of names, for their String methods and flag parsing.
package enum

import (
	"fmt"
	"strings"
)

// Name returns names[v], or "Type(v)" for a value outside the table.
func Name[T ~int](names []string, typ string, v T) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, int(v))
}

// Parse returns the value named s. Its error names what was wanted: "what %q: want a, b or c".
func Parse[T ~int](names []string, what, s string) (T, error) {
	for i, n := range names {
		if s == n {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("%s %q: want %s or %s", what, s, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}
