// Package migrate loads a driver's embedded, numbered SQL migrations and
// checks them for gaps; each driver applies them in its own dialect.
package migrate

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load reads every file in dir of fsys, named "NNN_description.sql", and
// returns them by version, failing if the versions are not 1..n.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %q: name must start with a number and '_'", e.Name())
		}
		body, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations: expected version %d, found %s", i+1, m.Name)
		}
	}
	return ms, nil
}
