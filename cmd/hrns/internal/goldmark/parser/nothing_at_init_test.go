package parser

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNothingAtInit keeps this copy of goldmark's packages free of
// package initialisation work (see ../README.md): no init function, and
// no package-level variable initialised by a call to regexp or by
// make, so that linking the parser costs a process nothing until it
// parses.
func TestNothingAtInit(t *testing.T) {
	files, err := filepath.Glob("../*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := goparser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == "init" {
					t.Errorf("%s: func init", fset.Position(d.Pos()))
				}
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				for _, s := range d.Specs {
					for _, v := range s.(*ast.ValueSpec).Values {
						call, ok := v.(*ast.CallExpr)
						if !ok {
							continue
						}
						switch fn := call.Fun.(type) {
						case *ast.SelectorExpr:
							if x, ok := fn.X.(*ast.Ident); ok && x.Name == "regexp" {
								t.Errorf("%s: regexp.%s at init", fset.Position(v.Pos()), fn.Sel.Name)
							}
						case *ast.Ident:
							if fn.Name == "make" {
								t.Errorf("%s: make at init", fset.Position(v.Pos()))
							}
						}
					}
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked %d files of ../ast, ../parser, ../text and ../util", checked)
	}
}
