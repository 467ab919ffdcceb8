// Command barecalls makes the scheduling benchmark's model calls with
// nothing around them: N rollouts of CALLS sequential chat requests each,
// WORKERS at a time, from a plain net/http client with a connection per
// worker kept alive. Its wall time is the floor the endpoint itself sets
// (its latency as this machine's timers and wake-ups deliver it), so
// bench-generate.sh can show how much of generate's time is its own.
//
//	barecalls --url http://127.0.0.1:PORT/v1 --n 2000 --workers 200 --calls 3
//
// It prints "wall SECONDS" and exits non-zero when a call fails.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "", "the endpoint's base URL (…/v1)")
	n := flag.Int("n", 2000, "rollouts")
	workers := flag.Int("workers", 200, "rollouts at a time")
	calls := flag.Int("calls", 3, "sequential calls per rollout")
	flag.Parse()
	if *url == "" || *n < 1 || *workers < 1 || *calls < 1 {
		flag.Usage()
		os.Exit(2)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: *workers, MaxIdleConnsPerHost: *workers}}
	var next atomic.Int64
	var failOnce sync.Once
	var failed error // the first call's failure
	var wg sync.WaitGroup
	start := time.Now()
	for range *workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(*n) {
					return
				}
				for c := range *calls {
					if err := call(client, *url, i, c); err != nil {
						failOnce.Do(func() { failed = err })
						return
					}
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if failed != nil {
		fmt.Fprintln(os.Stderr, "barecalls:", failed)
		os.Exit(1)
	}
	fmt.Printf("wall %.3f\n", wall.Seconds())
}

// call posts one single-turn chat request and reads the whole reply.
func call(client *http.Client, url string, rollout int64, n int) error {
	body := fmt.Appendf(nil, `{"model":"bench","messages":[{"role":"user","content":"bench answer %d.%d"}]}`, rollout, n)
	resp, err := client.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}
