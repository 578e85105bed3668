package backup

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/store/bolt"
)

// TestDaily: on a fake clock, with no backup yet one is taken at once,
// then one a day whatever the hourly checks in between, and only the
// newest Keep are kept.
func TestDaily(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backups := filepath.Join(t.TempDir(), "backups")
		start := time.Now()
		stop := runDaily(t, backups, 3)
		synctest.Wait()
		if got := names(t, backups); !slices.Equal(got, []string{Name(start)}) {
			t.Fatalf("at start: %q", got)
		}
		time.Sleep(23 * time.Hour)
		synctest.Wait()
		if got := names(t, backups); len(got) != 1 {
			t.Fatalf("after 23 hours: %q", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := names(t, backups); !slices.Equal(got, []string{Name(start), Name(start.Add(24 * time.Hour))}) {
			t.Fatalf("after a day: %q", got)
		}
		time.Sleep(4 * 24 * time.Hour)
		synctest.Wait()
		var want []string
		for day := 2; day <= 5; day++ {
			want = append(want, Name(start.Add(time.Duration(day)*24*time.Hour)))
		}
		want = want[1:]
		if got := names(t, backups); !slices.Equal(got, want) {
			t.Fatalf("after five days: %q, want %q", got, want)
		}
		for _, n := range want {
			if _, err := bolt.Verify(context.Background(), filepath.Join(backups, n)); err != nil {
				t.Error(err)
			}
		}
		if info, err := os.Stat(backups); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("backup_dir mode %v, %v", info.Mode(), err)
		}
		stop()
	})
}

// TestDailyAfterRestart: a parley started 5 hours after the last backup
// takes none until it is a day old.
func TestDailyAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backups := t.TempDir()
		last := Name(time.Now().Add(-5 * time.Hour))
		newDB(t, filepath.Join(backups, last), 1)
		stop := runDaily(t, backups, 7)
		synctest.Wait()
		if got := names(t, backups); !slices.Equal(got, []string{last}) {
			t.Fatalf("at start: %q", got)
		}
		time.Sleep(18 * time.Hour)
		synctest.Wait()
		if got := names(t, backups); len(got) != 1 {
			t.Fatalf("18 hours later: %q", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := names(t, backups); len(got) != 2 || got[0] != last {
			t.Fatalf("19 hours later: %q", got)
		}
		stop()
	})
}

// runDaily runs daily backups into dir of a store of two sessions, keeping
// keep, until stop.
func runDaily(t *testing.T, dir string, keep int) (stop func()) {
	t.Helper()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "parley.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 2)
	ctx, cancel := context.WithCancel(context.Background())
	d := &Daily{Dir: dir, Keep: keep, Source: Spooler{Dir: t.TempDir(), Take: s.Backup}, Logger: slog.New(slog.DiscardHandler)}
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	return func() {
		cancel()
		<-done
		s.Close()
	}
}
