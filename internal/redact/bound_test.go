package redact

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// A value or message beyond its bound is cut at the start of a character and
// says how much was cut; one within it, and an error within it, are kept.
func TestBounds(t *testing.T) {
	huge := strings.Repeat("é", 100<<10) // 200 KB of two-byte characters
	for name, got := range map[string]string{"Value": Value(huge), "Message": Message(huge)} {
		limit := map[string]int{"Value": MaxValue, "Message": MaxMessage}[name]
		if len(got) > limit+32 || !utf8.ValidString(got) || !strings.HasSuffix(got, "bytes more)") {
			t.Errorf("%s of 200 KB: %d bytes, valid UTF-8 %v: %.100q", name, len(got), utf8.ValidString(got), got)
		}
	}
	if got := Value("short"); got != "short" {
		t.Errorf("Value(short) = %q", got)
	}
	base := errors.New("base")
	if Bounded(base) != base || Bounded(nil) != nil {
		t.Error("an error within the bound was not kept as it is")
	}
	long := errors.Join(base, errors.New(huge))
	b := Bounded(long)
	if len(b.Error()) > MaxMessage+32 || !errors.Is(b, base) {
		t.Errorf("Bounded: %d bytes, unwraps to its error %v", len(b.Error()), errors.Is(b, base))
	}
}
