// Command multiget measures multi-gets by an array parameter, `SELECT * FROM kv WHERE id =
// ANY($1)`, the way pgx sends them (a prepared statement, the keys as a binary bigint[]), at
// several client counts: the side-by-side step bench/lookup.sh runs for the `any` shape, which
// pgbench cannot send (its parameters are scalars).
//
//	multiget -url postgres://admin:quest@127.0.0.1:28812/qdb -rows 1000000 -keys 10 \
//	         -clients 1,16,64 -seconds 8
//
// Prints one line per client count: `clients=N qps=Q p50_us=A p99_us=B max_us=C rows_per=R`,
// where qps counts keys looked up per second (queries times -keys), latencies are per query
// and rows_per is the rows a query returned on average (each key exists once: -keys).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	url := flag.String("url", "postgres://admin:quest@127.0.0.1:28812/qdb", "server")
	rows := flag.Int64("rows", 1_000_000, "ids are 1..rows")
	keys := flag.Int("keys", 10, "keys per query")
	clientsFlag := flag.String("clients", "1,16,64", "client counts")
	seconds := flag.Float64("seconds", 8, "seconds per step")
	query := flag.String("query", "SELECT * FROM kv WHERE id = ANY($1)", "the query; $1 is the keys")
	flag.Parse()
	ctx := context.Background()
	for _, c := range strings.Split(*clientsFlag, ",") {
		clients, err := strconv.Atoi(c)
		if err != nil || clients < 1 {
			fail("bad client count %q", c)
		}
		conns := make([]*pgx.Conn, clients)
		for i := range conns {
			conn, err := pgx.Connect(ctx, *url)
			if err != nil {
				fail("connect: %v", err)
			}
			defer conn.Close(ctx)
			conns[i] = conn
		}
		// A short warm-up, then the step.
		run(ctx, conns, *query, *rows, *keys, time.Second)
		lat, returned := run(ctx, conns, *query, *rows, *keys, time.Duration(*seconds*float64(time.Second)))
		slices.Sort(lat)
		n := len(lat)
		if n == 0 {
			fail("no query finished")
		}
		at := func(q float64) int64 { return lat[min(n-1, int(float64(n)*q))].Microseconds() }
		fmt.Printf("clients=%d qps=%.0f p50_us=%d p99_us=%d max_us=%d rows_per=%.2f\n", clients,
			float64(n*(*keys))/(*seconds), at(0.5), at(0.99), lat[n-1].Microseconds(), float64(returned)/float64(n))
		for _, conn := range conns {
			conn.Close(ctx)
		}
	}
}

// run has each connection query in a loop for d; returns every query's latency and the rows.
func run(ctx context.Context, conns []*pgx.Conn, query string, rows int64, keys int, d time.Duration) ([]time.Duration, int64) {
	var mu sync.Mutex
	var all []time.Duration
	var returned int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			ids := make([]int64, keys)
			var lat []time.Duration
			var got int64
			for time.Now().Before(deadline) {
				for k := range ids {
					ids[k] = 1 + r.Int64N(rows)
				}
				start := time.Now()
				rs, err := conn.Query(ctx, query, ids)
				if err != nil {
					fail("query: %v", err)
				}
				for rs.Next() {
					got++
				}
				if rs.Err() != nil {
					fail("query: %v", rs.Err())
				}
				lat = append(lat, time.Since(start))
			}
			mu.Lock()
			all = append(all, lat...)
			returned += got
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, returned
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "multiget: "+format+"\n", args...)
	os.Exit(1)
}
