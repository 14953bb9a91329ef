// Creates from one address as a Go program sends them with net/http's default client (http.Post, every setting at
// its default). CONCURRENCY goroutines each send their next create as soon as the last is answered, TOTAL in all;
// prints the summary test/helpers/client-summary.ts reads, as one JSON line.
//
//	creates URL TOKEN CONCURRENCY TOTAL FIRST_ID
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type outcome struct {
	status int
	err    string
	ms     float64
}

func main() {
	base, token := os.Args[1], os.Args[2]
	concurrency, _ := strconv.Atoi(os.Args[3])
	total, _ := strconv.Atoi(os.Args[4])
	firstID, _ := strconv.ParseInt(os.Args[5], 10, 64)
	var next int64 = -1
	var mu sync.Mutex
	outcomes := make([]outcome, 0, total)
	var wg sync.WaitGroup
	started := time.Now()
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				index := atomic.AddInt64(&next, 1)
				if index >= int64(total) {
					return
				}
				id := firstID + index
				request, _ := http.NewRequest("POST", base+"/plants", strings.NewReader(fmt.Sprintf(`{"id":%d,"name":"client %d"}`, id, id)))
				request.Header.Set("Authorization", "Bearer "+token)
				request.Header.Set("Content-Type", "application/json")
				at := time.Now()
				response, err := http.DefaultClient.Do(request)
				result := outcome{}
				if err != nil {
					result.err = fmt.Sprintf("%T", err)
				} else {
					_, _ = io.Copy(io.Discard, response.Body)
					response.Body.Close()
					result.status = response.StatusCode
				}
				result.ms = float64(time.Since(at).Microseconds()) / 1000
				mu.Lock()
				outcomes = append(outcomes, result)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := float64(time.Since(started).Microseconds()) / 1000
	statuses, errors, ok := map[string]int{}, map[string]int{}, 0
	times := make([]float64, 0, len(outcomes))
	for _, o := range outcomes {
		switch {
		case o.err != "":
			errors[o.err]++
		case o.status >= 200 && o.status < 300:
			ok++
		default:
			statuses[strconv.Itoa(o.status)]++
		}
		times = append(times, o.ms)
	}
	sort.Float64s(times)
	quantile := func(q float64) float64 {
		if len(times) == 0 {
			return 0
		}
		i := int(q * float64(len(times)))
		if i >= len(times) {
			i = len(times) - 1
		}
		return times[i]
	}
	max := 0.0
	if len(times) > 0 {
		max = times[len(times)-1]
	}
	out, _ := json.Marshal(map[string]any{"sent": len(outcomes), "ok": ok, "statuses": statuses, "errors": errors, "elapsedMs": elapsed, "p50Ms": quantile(0.5), "p99Ms": quantile(0.99), "maxMs": max})
	fmt.Println(string(out))
}
