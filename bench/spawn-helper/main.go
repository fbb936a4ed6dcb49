// spawn-helper starts programs for the process that started it, so that the fork is its own, not that
// process's: one request a line on stdin, {"id":1,"file":"/bin/true","args":[]}, one answer a line on
// stdout when the program ends, {"id":1,"code":0}, in the order they end. No shell: the file and its
// arguments as given. For bench/spawn-cost.ts only: it measures whether such a helper keeps a Node
// process's main thread free while a burst of tool runs starts.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"sync"
)

type request struct {
	ID   int64    `json:"id"`
	File string   `json:"file"`
	Args []string `json:"args"`
}

type answer struct {
	ID    int64  `json:"id"`
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"`
}

func main() {
	var mu sync.Mutex
	out := json.NewEncoder(os.Stdout)
	send := func(a answer) {
		mu.Lock()
		defer mu.Unlock()
		_ = out.Encode(a)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64*1024), 1024*1024)
	var wg sync.WaitGroup
	for in.Scan() {
		var r request
		if err := json.Unmarshal(in.Bytes(), &r); err != nil {
			send(answer{ID: -1, Code: -1, Error: "not a request: " + err.Error()})
			continue
		}
		wg.Add(1)
		go func(r request) {
			defer wg.Done()
			err := exec.Command(r.File, r.Args...).Run()
			var exit *exec.ExitError
			switch {
			case err == nil:
				send(answer{ID: r.ID})
			case errors.As(err, &exit):
				send(answer{ID: r.ID, Code: exit.ExitCode()})
			default:
				send(answer{ID: r.ID, Code: -1, Error: err.Error()})
			}
		}(r)
	}
	wg.Wait()
}
