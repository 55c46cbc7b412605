package enum

import "testing"

type color int

var colors = []string{"red", "green", "blue"}

func TestEnum(t *testing.T) {
	if Name(colors, "color", color(1)) != "green" || Name(colors, "color", color(7)) != "color(7)" {
		t.Error("Name")
	}
	if c, err := Parse[color](colors, "colour", "blue"); c != 2 || err != nil {
		t.Errorf("Parse(blue) = %d, %v", c, err)
	}
	if _, err := Parse[color](colors, "colour", "pink"); err == nil || err.Error() != `colour "pink": want red, green or blue` {
		t.Errorf("Parse(pink): %v", err)
	}
}
