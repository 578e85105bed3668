package main

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

// TestEveryFailedFindingHasAFix reads doctor's sources and checks every
// finding they build: one that states a Problem also states a non-empty
// Fix. The findings made of errors (failed) are the next test's.
func TestEveryFailedFindingHasAFix(t *testing.T) {
	files, err := filepath.Glob("doctor*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if id, ok := lit.Type.(*ast.Ident); !ok || id.Name != "finding" {
				return true
			}
			fields := map[string]ast.Expr{}
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					fields[kv.Key.(*ast.Ident).Name] = kv.Value
				}
			}
			if _, ok := fields["Problem"]; !ok {
				return true
			}
			seen++
			fix, ok := fields["Fix"]
			if b, isLit := fix.(*ast.BasicLit); !ok || isLit && (b.Value == `""` || b.Value == "``") {
				t.Errorf("%s: a finding with a problem and no fix", fset.Position(lit.Pos()))
			}
			return true
		})
	}
	if seen < 20 {
		t.Fatalf("found only %d findings with a problem: is the test reading doctor's sources?", seen)
	}
}

// TestFailedFindingsHaveAFix: a finding made of an error has the fix the
// error carries, or its check's general one.
func TestFailedFindingsHaveAFix(t *testing.T) {
	for _, check := range []string{"config", "telegram", "slack", "matrix"} {
		if f := failed(check, errors.New("something")); f.Fix == "" || f.OK {
			t.Errorf("%s: %+v", check, f)
		}
	}
}

// TestDoctorUnreachableBotAPI: a Bot API that cannot be reached is a
// finding with a fix that says what to check, and that parley serve
// carries on without Telegram.
func TestDoctorUnreachableBotAPI(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	_, fs := runDoctor(t, "PARLEY_TELEGRAM_TOKEN="+srv.Token, "PARLEY_TELEGRAM_API_URL="+closed,
		"PARLEY_TELEGRAM_CHAT_ID=-1", "PARLEY_TELEGRAM_ALLOWED_USERS=1")
	f := wantFinding(t, fs, "telegram", false, "cannot reach the Bot API", closed, "PARLEY_TELEGRAM_API_URL", "keeps serving without Telegram")
	if !strings.Contains(f.Fix, "reaches "+closed) {
		t.Errorf("fix %q", f.Fix)
	}
	for _, f := range fs {
		if !f.OK && f.Fix == "" {
			t.Errorf("a failed finding without a fix: %+v", f)
		}
	}
}
