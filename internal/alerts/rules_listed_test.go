package alerts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

// TestEveryFiringRuleIsListed: every condition the evaluator can build (a
// condition{rule: …} literal anywhere in the package) names a rule of
// RuleNames, the list keel_alerts_firing exports, so no rule can fire
// unseen by the metric (brake_open once was).
func TestEveryFiringRuleIsListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	var used []string
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[id.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); !ok || id.Name != "condition" {
					return true
				}
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "rule" {
							if v, ok := kv.Value.(*ast.Ident); ok {
								used = append(used, name+": "+v.Name)
							} else {
								t.Errorf("%s: a condition's rule is not a named constant", fset.Position(kv.Pos()))
							}
						}
					}
				}
			}
			return true
		})
	}
	if len(used) < len(RuleNames) {
		t.Fatalf("found %d condition literals (%v), want one for each of the %d rules at least", len(used), used, len(RuleNames))
	}
	for _, u := range used {
		name := u[slices.Index([]byte(u), ' ')+1:]
		if rule, ok := consts[name]; !ok || !slices.Contains(RuleNames, rule) {
			t.Errorf("%s: the rule %q is not in RuleNames %v", u, rule, RuleNames)
		}
	}
	for _, rule := range RuleNames {
		if resolution(&driver.AlertRow{Rule: rule, Subject: "x:y"}, defaults(), &estimator.Snapshot{}) == "its condition no longer holds." {
			t.Errorf("rule %s has no resolution of its own", rule)
		}
	}
}
