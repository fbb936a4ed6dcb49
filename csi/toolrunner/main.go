// nodedisks-toolrunner starts the node side's storage tools (losetup, mount, mkfs, blkid) for csi-node, so
// that the fork of each run is this small process's and not csi-node's: Node starts a program with a fork of
// its whole process on its main thread and waits there until the child has started the program, and under
// load that wait holds every other CSI call on the node (docs/adr/0048-tool-runs-from-a-helper.md).
//
// One request a line on stdin, one answer a line on stdout, in the order the runs end:
//
//	{"id":1,"file":"losetup","args":["--list"],"timeoutMs":30000}
//	{"id":1,"code":0,"stdout":"...","stderr":""}
//
// No shell: the file (looked up on this process's PATH) and its arguments as given; stdin is /dev/null; the
// environment is this process's own. A run that outlasts its time limit is killed (SIGKILL) and answered
// with timedOut; a file that is not there, with notFound. Each of stdout and stderr is kept up to 4 MiB;
// more is cut and said (truncated). At the end of stdin it waits for the runs under way, then exits.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Output kept per stream, as csi-node's own limit for a run.
const maxOutput = 4 << 20

type request struct {
	ID        int64    `json:"id"`
	File      string   `json:"file"`
	Args      []string `json:"args"`
	TimeoutMs int64    `json:"timeoutMs"`
}

type answer struct {
	ID        int64  `json:"id"`
	Code      int    `json:"code"`
	Signal    string `json:"signal,omitempty"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timedOut,omitempty"`
	NotFound  bool   `json:"notFound,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Error     string `json:"error,omitempty"`
}

// capped keeps the first maxOutput bytes written to it and drops the rest, saying so.
type capped struct {
	buf bytes.Buffer
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := maxOutput - c.buf.Len()
	if len(p) > room {
		c.cut = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func run(r request) answer {
	a := answer{ID: r.ID}
	if r.File == "" {
		a.Code, a.Error = -1, "no file to run"
		return a
	}
	path, err := exec.LookPath(r.File)
	if err != nil {
		a.Code, a.NotFound, a.Error = -1, true, err.Error()
		return a
	}
	cmd := exec.Command(path, r.Args...)
	cmd.Args[0] = r.File
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		a.Code, a.Error = -1, err.Error()
		a.NotFound = errors.Is(err, os.ErrNotExist)
		return a
	}
	timeout := time.Duration(r.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Minute
	}
	timer := time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
	err = cmd.Wait()
	a.TimedOut = !timer.Stop()
	a.Stdout, a.Stderr, a.Truncated = stdout.buf.String(), stderr.buf.String(), stdout.cut || stderr.cut
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		a.Code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			a.Signal = signalName(ws.Signal())
		}
	default:
		a.Code, a.Error = -1, err.Error()
	}
	return a
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	}
	return fmt.Sprintf("signal %d", int(s))
}

func main() {
	var mu sync.Mutex
	out := json.NewEncoder(os.Stdout)
	send := func(a answer) {
		mu.Lock()
		defer mu.Unlock()
		if err := out.Encode(a); err != nil {
			// Nobody reads the answers any more: csi-node is gone.
			os.Exit(1)
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	var wg sync.WaitGroup
	for in.Scan() {
		var r request
		if err := json.Unmarshal(in.Bytes(), &r); err != nil {
			send(answer{ID: -1, Code: -1, Error: "not a request: " + err.Error()})
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(run(r))
		}()
	}
	wg.Wait()
}
