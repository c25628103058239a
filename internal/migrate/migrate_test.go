package migrate

import (
	"testing"
	"testing/fstest"
)

func TestLoadOrdersAndChecksGaps(t *testing.T) {
	ms, err := Load(fstest.MapFS{
		"m/002_b.sql": {Data: []byte("B")},
		"m/001_a.sql": {Data: []byte("A")},
	}, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Name != "001_a.sql" || ms[1].SQL != "B" || ms[1].Version != 2 {
		t.Fatalf("loaded %+v", ms)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"m/001_a.sql": {}, "m/003_c.sql": {}},
		"no number": {"m/a.sql": {}},
		"duplicate": {"m/001_a.sql": {}, "m/001_b.sql": {}},
	} {
		if _, err := Load(fsys, "m"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
