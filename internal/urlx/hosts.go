package urlx

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/locker-go/locker"
)

// Invalid is an error matching locker.ErrInvalidURL that names u, redacted,
// and the problem.
func Invalid(u *url.URL, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", locker.ErrInvalidURL, Redact(u), fmt.Sprintf(format, args...))
}

// Hosts splits a URL's comma-separated host list into host:port
// addresses, with defaultPort where a host has none. Each needs a host
// name and a port in 1–65535; the same address twice is refused (a
// Redlock master would vote twice). An IPv6 address is bracketed.
func Hosts(list, defaultPort string) ([]string, error) {
	if list == "" {
		return nil, errors.New("no host: want host:port[,host:port...]")
	}
	var addrs []string
	for h := range strings.SplitSeq(list, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = strings.Trim(h, "[]"), defaultPort
			if strings.ContainsAny(host, "[]") || strings.Contains(host, ":") && !strings.HasPrefix(h, "[") {
				return nil, fmt.Errorf("host %q is not host:port", h)
			}
		}
		if host == "" {
			return nil, fmt.Errorf("host %q has no host name", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("host %q: port %q is not in 1–65535", h, port)
		}
		addr := net.JoinHostPort(host, port)
		if slices.Contains(addrs, addr) {
			return nil, fmt.Errorf("host %s is given twice", addr)
		}
		addrs = append(addrs, addr)
	}
	return addrs, nil
}
