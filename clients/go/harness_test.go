// Test harness: a real redis-server and dlockd on private sockets in a temp dir.
// SPDX-License-Identifier: MIT

package dlock

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

const (
	startTimeout = 15 * time.Second // redis-server and dlockd coming up
	hangGuard    = 10 * time.Second // longest any single event may take
	confLeaseMs  = 600
)

var env struct {
	skip   string // why the tests skip, "" when they run
	tmp    string
	redis  string // redis's socket
	sock   string // the shared dlockd's socket
	dlockd string
	procs  []*exec.Cmd
}

func TestMain(m *testing.M) {
	code := func() int {
		env.dlockd = os.Getenv("DLOCKD_BIN")
		if env.dlockd == "" {
			env.skip = "DLOCKD_BIN is not set: these tests need a real dlockd (make build/dlockd; DLOCKD_BIN=$PWD/build/dlockd)"
			fmt.Fprintln(os.Stderr, "dlock tests skipped:", env.skip)
			return m.Run()
		}
		redis, err := exec.LookPath("redis-server")
		if err != nil {
			fmt.Fprintln(os.Stderr, "redis-server not found in PATH")
			return 1
		}
		env.tmp, err = os.MkdirTemp("", "dlock-go-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
		env.redis = filepath.Join(env.tmp, "redis.sock")
		spawn("redis.log", redis, "--port", "0", "--unixsocket", env.redis, "--save", "",
			"--appendonly", "no", "--dir", env.tmp)
		env.sock, err = startDaemon("d")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

func spawn(logname string, argv ...string) *exec.Cmd {
	log, err := os.Create(filepath.Join(env.tmp, logname))
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = env.tmp, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	env.procs = append(env.procs, cmd)
	return cmd
}

// startDaemon starts a dlockd sharing the redis; returns its socket.
func startDaemon(tag string) (string, error) {
	sock, _, err := startDaemonCmd(tag)
	return sock, err
}

func startDaemonCmd(tag string) (string, *exec.Cmd, error) {
	sock := filepath.Join(env.tmp, tag+".sock")
	conf := filepath.Join(env.tmp, tag+".conf")
	text := fmt.Sprintf("[server]\nsocket = %s\nadmin_uids = %d\n[redis]\nurl = unix://%s\n[lock]\nlease_ms = %d\n",
		sock, os.Getuid(), env.redis, confLeaseMs)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return "", nil, err
	}
	cmd := spawn(tag+".log", env.dlockd, "-c", conf)
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := Dial(ctx, sock)
		if err == nil {
			var info map[string]string
			info, err = c.Info(ctx)
			c.Close()
			if err == nil && info["redis"] == "up" {
				cancel()
				return sock, cmd, nil
			}
			if err == nil {
				err = fmt.Errorf("redis=%s", info["redis"])
			}
		}
		cancel()
		last = err
		time.Sleep(20 * time.Millisecond) // poll interval while it starts
	}
	return "", nil, fmt.Errorf("dlockd not ready within %s: %v (logs in %s)", startTimeout, last, env.tmp)
}

func cleanup() {
	for i := len(env.procs) - 1; i >= 0; i-- {
		p := env.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	if env.tmp != "" && os.Getenv("DLOCK_KEEP_TMP") == "" {
		os.RemoveAll(env.tmp)
	}
}

// ---- helpers for the tests ----

var nameSeq int

func testName(t *testing.T) string {
	nameSeq++
	return "go-" + t.Name() + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(nameSeq)
}

func dial(t *testing.T) *Client {
	t.Helper()
	return dialPath(t, sockOf(t))
}

func sockOf(t *testing.T) string {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	return env.sock
}

func dialPath(t *testing.T, path string) *Client {
	t.Helper()
	c, err := Dial(guard(t), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// guard is a context that only ends if the test hangs.
func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// waitFor waits (polling; a hang guard bounds it) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}

// waiters is dlockd's count of waiting requests.
func waiters(t *testing.T, c *Client) int {
	t.Helper()
	info, err := c.Info(guard(t))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(info["waiters"])
	return n
}

// done waits for ch to close, failing the test after the hang guard.
func waitDone(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Fatalf("timed out waiting for %s", what)
	}
}
