//go:build unix

package e2e

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// startLoadServe starts `parley serve` as its own process for a load
// command, on a free loopback port with a data directory in dir and the
// web page only, and waits until /api/health answers. binEnv names the
// variable that may give another parley binary to run (to compare with
// an older build); without it this one is built. It returns the base URL
// and the process, which is killed when the test ends.
func startLoadServe(t *testing.T, dir, binEnv string) (string, *exec.Cmd) {
	t.Helper()
	bin := os.Getenv(binEnv)
	if bin == "" {
		var err error
		if bin, err = buildParley(dir, false); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "serve", "--data-dir", filepath.Join(dir, "data"), "--listen", addr)
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "PARLEY_LOG_LEVEL=warn"}
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := "http://" + addr
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/api/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, cmd
			}
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("parley serve did not start")
		}
	}
}
