package llm

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// A run of W workers starts W calls at once, each on a new connection: the
// first wave's calls wait for their connects (and the endpoint for its
// accepts) while every other rollout starts too, and the slowest of that
// wave sets the run's end (on this machine, in an instrumented run of
// scripts/bench-generate.sh scheduling, the first call of 200 waited
// 13.9 ms for its connection, the calls after the first wave 0.01 ms).
// Prewarm opens those
// connections while the run still checks its sandbox and reads its ledger;
// the transport takes them before dialing its own.

// Prewarmer is a Client that can open connections to its endpoint ahead of
// its first calls.
type Prewarmer interface {
	// Prewarm opens up to n connections in the background and returns at
	// once. Connections no call has taken within a short time are closed.
	Prewarm(n int)
}

// warmTTL is how long a pre-dialed connection waits for a call: the run's
// first calls start within tens of milliseconds of Prewarm; an endpoint may
// close a connection that sends no request for some seconds.
const warmTTL = 2 * time.Second

// warmDialers is how many connects Prewarm has in flight at once.
const warmDialers = 8

// warmPool holds connections dialed ahead of need for one address: the
// transport's DialContext (dial) takes one before dialing itself.
type warmPool struct {
	dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	proxy  func(*http.Request) (*url.URL, error) // the transport's: Prewarm dials only without one
	ttl    time.Duration

	mu      sync.Mutex
	addr    string // what the transport dials for the base URL; "" until Prewarm
	conns   []net.Conn
	expired bool // after ttl or CloseIdleConnections: nothing more is kept
	timer   *time.Timer
}

func newWarmPool(dialer func(ctx context.Context, network, addr string) (net.Conn, error), proxy func(*http.Request) (*url.URL, error)) *warmPool {
	return &warmPool{dialer: dialer, proxy: proxy, ttl: warmTTL}
}

// dial is the transport's DialContext: a live pre-dialed connection to addr
// if the pool has one, else a new one.
func (p *warmPool) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if network == "tcp" {
		if c := p.take(addr); c != nil {
			return c, nil
		}
	}
	return p.dialer(ctx, network, addr)
}

// take pops a pooled connection to addr that the endpoint has not closed
// (nor written to: a reply to no request is a connection to drop).
func (p *warmPool) take(addr string) net.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if addr != p.addr {
		return nil
	}
	for len(p.conns) > 0 {
		c := p.conns[len(p.conns)-1]
		p.conns = p.conns[:len(p.conns)-1]
		if idle(c) {
			return c
		}
		_ = c.Close()
	}
	return nil
}

// start dials n connections to addr, warmDialers at a time, and keeps them
// until ttl has passed. The first failed connect stops it: the calls will
// meet the same failure and report it.
func (p *warmPool) start(addr string, n int) {
	p.mu.Lock()
	if p.addr != "" || p.expired {
		p.mu.Unlock()
		return // one warm-up per client
	}
	p.addr = addr
	p.timer = time.AfterFunc(p.ttl, p.expire)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.ttl)
	var left atomic.Int64 // connects not started yet
	left.Store(int64(n))
	var wg sync.WaitGroup
	for range min(n, warmDialers) {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				c, err := p.dialer(ctx, "tcp", addr)
				if err != nil {
					cancel() // the others stop too
					return
				}
				if !p.keep(c) {
					_ = c.Close()
					cancel()
					return
				}
			}
		})
	}
	go func() {
		wg.Wait()
		cancel()
	}()
}

// keep adds c to the pool unless the pool has expired.
func (p *warmPool) keep(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.expired {
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

// expire closes the connections no call took and keeps no more.
func (p *warmPool) expire() {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.expired = nil, true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Prewarm opens up to n connections to a plain-http endpoint reached
// without a proxy, the usual shape of a local inference server that many
// workers share, on systems where a pooled connection can be checked
// (canPeek). An https endpoint is left alone: it negotiates HTTP/2 and
// serves the calls on a few shared connections. A client given its own
// HTTPClient is left alone too.
func (c *client) Prewarm(n int) {
	if c.warm == nil || n <= 0 || !canPeek {
		return
	}
	req, err := http.NewRequest(http.MethodPost, c.direct.url, nil)
	if err != nil || req.URL.Scheme != "http" {
		return
	}
	if c.warm.proxy != nil {
		if u, err := c.warm.proxy(req); err != nil || u != nil {
			return
		}
	}
	// As the transport names it (host and port, the port said or not).
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	c.warm.start(net.JoinHostPort(req.URL.Hostname(), port), n)
}
