//go:build !unix

package llm

import "net"

// canPeek: idle cannot look at a connection here, so Prewarm dials nothing.
const canPeek = false

// idle reports no pooled connection as usable.
func idle(net.Conn) bool { return false }
