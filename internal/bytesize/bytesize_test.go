package bytesize

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"32MiB", 32 << 20}, {"200MB", 200e6}, {"8GiB", 8 << 30}, {"8g", 8 << 30},
		{"1048576", 1 << 20}, {"1.5KiB", 1536}, {" 64 MiB ", 64 << 20}, {"10B", 10},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1MiB", "12XB", "abc", "NaN", "nanMiB", "Inf", "-Inf", "+Inf GiB"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded, want error", bad)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{{32 << 20, "32MiB"}, {1536, "1.5KiB"}, {8 << 30, "8GiB"}, {100, "100B"}} {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList("32MiB,100MiB,1GiB,8GiB")
	if err != nil || len(got) != 4 || got[3] != 8<<30 {
		t.Fatalf("ParseList = %v, %v", got, err)
	}
}
